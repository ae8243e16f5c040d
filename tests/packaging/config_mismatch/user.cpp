// A unit of the same program built with another setting: the link must fail and name the
// configuration the kernels lack (ms_kernels_built_with_...).
#include <ms/core/linkage.hpp>
int ms_consumer_kernels();
int main() { return ms_consumer_kernels(); }
