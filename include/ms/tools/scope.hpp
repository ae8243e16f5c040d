#pragma once
// The one scope type of the observing tools: ProfilerScope and DumpScope are ToolScope of
// their tool. A tool is anything with start() and stop() (ms::Profiler, ms::DataDump).

namespace ms {

/// Runs `tool` from construction to destruction (also when an exception leaves the scope).
template <class Tool>
class ToolScope {
 public:
  explicit ToolScope(Tool& tool) : tool_(tool) { tool_.start(); }
  ~ToolScope() { tool_.stop(); }
  ToolScope(const ToolScope&) = delete;
  ToolScope& operator=(const ToolScope&) = delete;

 private:
  Tool& tool_;
};

}  // namespace ms
