// How pipetrain's CLIs parse their flags with CLI11: --help and --version print and exit 0; a
// bad flag prints "<program>: <error> (run with --help for usage)" and exits 2 (bad input, the
// exit code scripts rely on). Header-only: included by the `main`s, which link CLI11.
//
// Thread-safety: call from main only.
#ifndef PIPETRAIN_COMMON_COMMAND_LINE_H_
#define PIPETRAIN_COMMON_COMMAND_LINE_H_

#include <iostream>
#include <optional>
#include <string>

#include "CLI/CLI.hpp"

namespace pipetrain {

// nullopt: parsed, go on; else the exit code main should return now.
inline std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv,
                                           const std::string& program) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << program << ": " << e.what() << " (run with --help for usage)\n";
    return 2;
  }
  return std::nullopt;
}

}  // namespace pipetrain

#endif  // PIPETRAIN_COMMON_COMMAND_LINE_H_
