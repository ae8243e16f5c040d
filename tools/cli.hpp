#pragma once
// What the command-line tools share: their usage error and the CLI11 parse step.

#include <iostream>
#include <optional>
#include <stdexcept>

#include <CLI/CLI.hpp>

namespace ms_tools {

/// A usage mistake (the tool prints it with a hint to run `<tool> help`, exit status 2).
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Parses the command line. Returns the exit status when the tool is done (--help and
/// --version print their text: 0), nothing when it should go on; a parse error becomes a
/// UsageError naming the option and what it accepts.
inline std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::cout << app.help();
    return 0;
  } catch (const CLI::CallForVersion&) {
    std::cout << app.version() << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
  return std::nullopt;
}

}  // namespace ms_tools
