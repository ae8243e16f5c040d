// Stands for the unit that compiles the kernels of a separate-kernels program
// (ms_add_kernel_library), built with one setting of MS_HAVE_BLAS.
#define MS_KERNELS_IMPLEMENTATION
#include <ms/core/linkage.hpp>
int ms_consumer_kernels() { return 0; }
