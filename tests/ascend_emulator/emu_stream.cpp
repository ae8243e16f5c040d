// Ascend emulator: in-order streams run by worker threads, events, stream
// capture (aclmdlRI*) and replay.

// Built only by the ms_ascend_emulator target (CMakeLists.txt defines
// MS_ASCEND_EMULATOR_BUILD); a test build that globs tests/*/*.cpp gets an
// empty translation unit here instead of a second copy of the emulator.
#ifdef MS_ASCEND_EMULATOR_BUILD

#include <sys/prctl.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "emu_internal.hpp"

namespace msemu {
namespace {

struct Model {
  std::vector<Task> tasks;
};

/// The error state of the stream whose worker is running the current task: an event
/// recorded after a failure carries the failure to the streams that wait for it.
thread_local int t_stream_error = ACL_SUCCESS;
thread_local std::string t_stream_error_msg;

struct Stream {
  std::mutex mu;
  std::condition_variable cv_work, cv_done;
  std::deque<Task> queue;
  uint64_t enqueued = 0, completed = 0;
  bool stop = false;
  int error = ACL_SUCCESS;  // first failure since the last synchronize
  std::string error_msg;
  std::shared_ptr<Model> capture;  // set while capturing
  std::thread worker;

  void start() { worker = std::thread([this] { run(); }); }

  void run() {
#ifdef PR_SET_TIMERSLACK
    ::prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);  // precise modelled delays
#endif
    for (;;) {
      Task task;
      bool skip = false;
      {
        std::unique_lock lk(mu);
        cv_work.wait(lk, [&] { return stop || !queue.empty(); });
        if (queue.empty()) return;
        task = std::move(queue.front());
        queue.pop_front();
        // After a failure the stream's remaining kernels and copies are not run;
        // event records and waits still are, so nothing waiting on them hangs.
        skip = error != ACL_SUCCESS && task.kind != TaskKind::EventRecord &&
               task.kind != TaskKind::EventWait;
      }
      int rc = ACL_SUCCESS;
      std::string msg;
      {
        std::lock_guard lk(mu);
        t_stream_error = error;
        t_stream_error_msg = error_msg;
      }
      if (!skip) {
        // Kernels executing at once over all streams: their latencies overlap when
        // independent branches run on separate streams.
        const bool kernel = task.kind == TaskKind::Kernel;
        if (kernel) {
          Counters& c = counters();
          const uint64_t now = ++c.running_kernels;
          uint64_t peak = c.peak_running_kernels.load();
          while (now > peak && !c.peak_running_kernels.compare_exchange_weak(peak, now)) {
          }
        }
        sleep_ns(task.delay_ns);
        rc = run_task_body(task);
        if (kernel) --counters().running_kernels;
        if (rc != ACL_SUCCESS) msg = take_error();
      }
      task = Task{};  // release device memory before reporting completion
      {
        std::lock_guard lk(mu);
        ++completed;
        if (rc != ACL_SUCCESS && error == ACL_SUCCESS) {
          error = rc;
          error_msg = msg.empty() ? strf("a task on the stream failed with code %d", rc) : msg;
        }
      }
      cv_done.notify_all();
    }
  }

  void shutdown() {
    {
      std::lock_guard lk(mu);
      stop = true;
    }
    cv_work.notify_all();
    if (worker.joinable()) worker.join();
  }
};

struct Event {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t issued = 0, completed = 0;  // records enqueued / reached
  Clock::time_point stamp{};
  int error = ACL_SUCCESS;  // the recording stream had failed when the last record ran
  std::string error_msg;
};

struct Registry {
  std::mutex mu;
  std::unordered_map<void*, std::shared_ptr<Stream>> streams;
  std::unordered_map<void*, std::shared_ptr<Event>> events;
  std::unordered_map<void*, std::shared_ptr<Model>> models;
  std::shared_ptr<Stream> default_stream;
};

Registry& reg() {
  static Registry* r = new Registry();  // never destroyed: worker threads outlive statics
  return *r;
}

// nullptr names the default stream, created on first use.
int find_stream(aclrtStream handle, const char* fn, std::shared_ptr<Stream>& out) {
  Registry& r = reg();
  std::lock_guard lk(r.mu);
  if (handle == nullptr) {
    if (!r.default_stream) {
      r.default_stream = std::make_shared<Stream>();
      r.default_stream->start();
    }
    out = r.default_stream;
    return ACL_SUCCESS;
  }
  auto it = r.streams.find(handle);
  if (it == r.streams.end()) {
    return fail(ACL_ERROR_INVALID_RESOURCE_HANDLE, strf("%s: %p is not a live stream", fn, handle));
  }
  out = it->second;
  return ACL_SUCCESS;
}

int find_event(aclrtEvent handle, const char* fn, std::shared_ptr<Event>& out) {
  Registry& r = reg();
  std::lock_guard lk(r.mu);
  auto it = r.events.find(handle);
  if (handle == nullptr || it == r.events.end()) {
    return fail(ACL_ERROR_INVALID_RESOURCE_HANDLE, strf("%s: %p is not a live event", fn, handle));
  }
  out = it->second;
  return ACL_SUCCESS;
}

int sync_stream(Stream& s, const char* fn) {
  std::unique_lock lk(s.mu);
  if (s.capture) {
    return fail(ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT,
                strf("%s: the stream is being captured; end the capture first", fn));
  }
  const uint64_t target = s.enqueued;
  s.cv_done.wait(lk, [&] { return s.completed >= target; });
  const int rc = s.error;
  std::string msg = std::move(s.error_msg);
  s.error = ACL_SUCCESS;
  s.error_msg.clear();
  lk.unlock();
  if (rc != ACL_SUCCESS) return fail(rc, strf("%s: %s", fn, msg.c_str()));
  return ACL_SUCCESS;
}

}  // namespace

int run_task_body(const Task& task) {
  // A block freed (aclrtFree) after this task was queued: on a device the task would
  // read or write memory that may already belong to someone else.
  for (const AllocRef& r : task.refs) {
    if (r && r->freed.load()) {
      ++counters().use_after_free;
      const int code = task.kind != TaskKind::Kernel                   ? ACL_ERROR_RT_COPY_DATA
                       : task.name.rfind("aclop", 0) == 0                ? ACL_ERROR_RT_AICPU_EXCEPTION
                                                                         : ACL_ERROR_RT_AICORE_EXCEPTION;
      return fail(code, strf("use-after-free: %s touches device memory at 0x%zx (%zu bytes) that aclrtFree "
                             "released after the task was queued and before it ran",
                             task.name.c_str(), static_cast<size_t>(r->base), r->size));
    }
  }
  if (task.kind == TaskKind::Kernel && fault_fires(MS_EMU_FAULT_STREAM)) {
    if (task.name.rfind("aclop", 0) == 0) {  // an AI CPU operator
      return fail(ACL_ERROR_RT_AICPU_EXCEPTION,
                  strf("emulated AI CPU exception in %s (injected fault)", task.name.c_str()));
    }
    return fail(ACL_ERROR_RT_AICORE_EXCEPTION,
                strf("emulated AI Core exception in %s (injected fault)", task.name.c_str()));
  }
  return task.body ? task.body() : ACL_SUCCESS;
}

int enqueue(aclrtStream stream, Task task, const char* fn, bool* captured) {
  std::shared_ptr<Stream> s;
  if (int rc = find_stream(stream, fn, s); rc != ACL_SUCCESS) return rc;
  {
    std::lock_guard lk(s->mu);
    if (s->capture) {
      if (task.kind == TaskKind::EventRecord || task.kind == TaskKind::EventWait ||
          task.kind == TaskKind::Replay) {
        return fail(ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT,
                    strf("%s: not supported on a capturing stream by the emulator", fn));
      }
      s->capture->tasks.push_back(std::move(task));
      ++counters().captured_tasks;
      if (captured) *captured = true;
      return ACL_SUCCESS;
    }
    s->queue.push_back(std::move(task));
    ++s->enqueued;
  }
  s->cv_work.notify_one();
  if (captured) *captured = false;
  return ACL_SUCCESS;
}

int synchronize_all(const char* fn) {
  std::vector<std::shared_ptr<Stream>> all;
  {
    Registry& r = reg();
    std::lock_guard lk(r.mu);
    for (auto& [h, s] : r.streams) all.push_back(s);
    if (r.default_stream) all.push_back(r.default_stream);
  }
  int first = ACL_SUCCESS;
  std::string first_msg;
  for (auto& s : all) {
    const int rc = sync_stream(*s, fn);
    if (rc != ACL_SUCCESS && first == ACL_SUCCESS) {
      first = rc;
      first_msg = take_error();
    }
  }
  return first == ACL_SUCCESS ? ACL_SUCCESS : fail(first, std::move(first_msg));
}

void fill_stream_gauges(msEmuCounters& out) {
  Registry& r = reg();
  std::lock_guard lk(r.mu);
  out.live_streams = r.streams.size();
  out.live_events = r.events.size();
  out.live_models = r.models.size();
}

}  // namespace msemu

using namespace msemu;

// ================================================================ streams

MS_EMU_API aclError aclrtCreateStream(aclrtStream* stream) {
  if (int rc = check_context("aclrtCreateStream"); rc != ACL_SUCCESS) return rc;
  if (stream == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateStream: stream is null");
  auto s = std::make_shared<Stream>();
  s->start();
  Registry& r = reg();
  std::lock_guard lk(r.mu);
  *stream = s.get();
  r.streams.emplace(s.get(), std::move(s));
  return ACL_SUCCESS;
}

MS_EMU_API aclError aclrtDestroyStream(aclrtStream stream) {
  std::shared_ptr<Stream> s;
  {
    Registry& r = reg();
    std::lock_guard lk(r.mu);
    auto it = stream == nullptr ? r.streams.end() : r.streams.find(stream);
    if (it == r.streams.end()) {
      return fail(ACL_ERROR_INVALID_RESOURCE_HANDLE,
                  strf("aclrtDestroyStream: %p is not a live stream", stream));
    }
    {
      std::lock_guard slk(it->second->mu);
      if (it->second->capture) {
        return fail(ACL_ERROR_RT_STREAM_CAPTURED, "aclrtDestroyStream: the stream is being captured");
      }
    }
    s = std::move(it->second);
    r.streams.erase(it);
  }
  s->shutdown();  // runs what is queued, then joins the worker
  return ACL_SUCCESS;
}

MS_EMU_API aclError aclrtSynchronizeStream(aclrtStream stream) {
  if (int rc = check_context("aclrtSynchronizeStream"); rc != ACL_SUCCESS) return rc;
  std::shared_ptr<Stream> s;
  if (int rc = find_stream(stream, "aclrtSynchronizeStream", s); rc != ACL_SUCCESS) return rc;
  const int rc = sync_stream(*s, "aclrtSynchronizeStream");
  if (rc == ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT) return rc;
  ++counters().syncs;
  sleep_ns(sync_ns());
  return rc;
}

int msemu::drain_stream(aclrtStream stream, const char* fn) {
  std::shared_ptr<Stream> s;
  if (int rc = find_stream(stream, fn, s); rc != ACL_SUCCESS) return rc;
  {
    std::lock_guard lk(s->mu);
    if (s->capture) {
      return fail(ACL_ERROR_RT_STREAM_CAPTURED,
                  strf("%s: a copy from or to pageable host memory cannot be captured (it synchronizes the "
                       "stream); use memory from aclrtMallocHost", fn));
    }
  }
  return sync_stream(*s, fn);
}

MS_EMU_API aclError aclrtSynchronizeDevice() {
  if (int rc = check_context("aclrtSynchronizeDevice"); rc != ACL_SUCCESS) return rc;
  const int rc = synchronize_all("aclrtSynchronizeDevice");
  ++counters().syncs;
  sleep_ns(sync_ns());
  return rc;
}

// ================================================================ events

MS_EMU_API aclError aclrtCreateEvent(aclrtEvent* event) {
  if (int rc = check_context("aclrtCreateEvent"); rc != ACL_SUCCESS) return rc;
  if (event == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtCreateEvent: event is null");
  auto e = std::make_shared<Event>();
  Registry& r = reg();
  std::lock_guard lk(r.mu);
  *event = e.get();
  r.events.emplace(e.get(), std::move(e));
  return ACL_SUCCESS;
}

MS_EMU_API aclError aclrtDestroyEvent(aclrtEvent event) {
  Registry& r = reg();
  std::lock_guard lk(r.mu);
  if (event == nullptr || r.events.erase(event) == 0) {
    return fail(ACL_ERROR_INVALID_RESOURCE_HANDLE,
                strf("aclrtDestroyEvent: %p is not a live event", event));
  }
  return ACL_SUCCESS;  // records/waits still queued hold their own reference
}

MS_EMU_API aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) {
  static constexpr const char* fn = "aclrtRecordEvent";
  if (int rc = check_context(fn); rc != ACL_SUCCESS) return rc;
  std::shared_ptr<Event> e;
  if (int rc = find_event(event, fn, e); rc != ACL_SUCCESS) return rc;
  uint64_t seq = 0;
  {
    std::lock_guard lk(e->mu);
    seq = ++e->issued;
  }
  Task task;
  task.kind = TaskKind::EventRecord;
  task.name = fn;
  task.body = [e, seq] {
    {
      std::lock_guard lk(e->mu);
      e->stamp = Clock::now();
      if (seq > e->completed) e->completed = seq;
      e->error = t_stream_error;
      e->error_msg = t_stream_error_msg;
    }
    e->cv.notify_all();
    return ACL_SUCCESS;
  };
  const int rc = enqueue(stream, std::move(task), fn, nullptr);
  if (rc != ACL_SUCCESS) {
    // Roll the record back so waiters do not wait for a record that never runs.
    std::lock_guard lk(e->mu);
    if (e->issued == seq) --e->issued;
  }
  return rc;
}

MS_EMU_API aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) {
  static constexpr const char* fn = "aclrtStreamWaitEvent";
  if (int rc = check_context(fn); rc != ACL_SUCCESS) return rc;
  std::shared_ptr<Event> e;
  if (int rc = find_event(event, fn, e); rc != ACL_SUCCESS) return rc;
  uint64_t target = 0;
  {
    std::lock_guard lk(e->mu);
    target = e->issued;  // the most recent record at the time of this call
  }
  Task task;
  task.kind = TaskKind::EventWait;
  task.name = fn;
  task.body = [e, target] {
    std::unique_lock lk(e->mu);
    e->cv.wait(lk, [&] { return e->completed >= target; });
    // Work that depends on a failed stream fails too (as a device exception does on hardware).
    if (e->error != ACL_SUCCESS) {
      const int rc = e->error;
      const std::string msg = e->error_msg;
      lk.unlock();
      return fail(rc, strf("aclrtStreamWaitEvent: the awaited stream failed: %s", msg.c_str()));
    }
    return ACL_SUCCESS;
  };
  return enqueue(stream, std::move(task), fn, nullptr);
}

MS_EMU_API aclError aclrtSynchronizeEvent(aclrtEvent event) {
  static constexpr const char* fn = "aclrtSynchronizeEvent";
  if (int rc = check_context(fn); rc != ACL_SUCCESS) return rc;
  std::shared_ptr<Event> e;
  if (int rc = find_event(event, fn, e); rc != ACL_SUCCESS) return rc;
  {
    std::unique_lock lk(e->mu);
    const uint64_t target = e->issued;
    e->cv.wait(lk, [&] { return e->completed >= target; });
  }
  ++counters().syncs;
  sleep_ns(sync_ns());
  return ACL_SUCCESS;
}

MS_EMU_API aclError aclrtQueryEventStatus(aclrtEvent event, aclrtEventRecordedStatus* status) {
  static constexpr const char* fn = "aclrtQueryEventStatus";
  if (int rc = check_context(fn); rc != ACL_SUCCESS) return rc;
  if (status == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtQueryEventStatus: status is null");
  std::shared_ptr<Event> e;
  if (int rc = find_event(event, fn, e); rc != ACL_SUCCESS) return rc;
  std::lock_guard lk(e->mu);
  *status = e->completed >= e->issued ? ACL_EVENT_RECORDED_STATUS_COMPLETE : ACL_EVENT_RECORDED_STATUS_NOT_READY;
  return ACL_SUCCESS;
}

MS_EMU_API aclError aclrtEventElapsedTime(float* ms, aclrtEvent startEvent, aclrtEvent endEvent) {
  static constexpr const char* fn = "aclrtEventElapsedTime";
  if (ms == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclrtEventElapsedTime: ms is null");
  std::shared_ptr<Event> a, b;
  if (int rc = find_event(startEvent, fn, a); rc != ACL_SUCCESS) return rc;
  if (int rc = find_event(endEvent, fn, b); rc != ACL_SUCCESS) return rc;
  Clock::time_point ta, tb;
  for (int i = 0; i < 2; ++i) {
    Event& ev = i == 0 ? *a : *b;
    const char* which = i == 0 ? "startEvent" : "endEvent";
    std::lock_guard lk(ev.mu);
    if (ev.completed == 0) {
      return fail(ACL_ERROR_RT_EVENT_TIMESTAMP_INVALID, strf("%s: %s has never been recorded", fn, which));
    }
    if (ev.completed < ev.issued) {
      return fail(ACL_ERROR_RT_EVENT_NOT_COMPLETE, strf("%s: %s has not completed yet", fn, which));
    }
    (i == 0 ? ta : tb) = ev.stamp;
  }
  *ms = std::chrono::duration<float, std::milli>(tb - ta).count();
  return ACL_SUCCESS;
}

// ================================================================ capture

MS_EMU_API aclError aclmdlRICaptureBegin(aclrtStream stream, aclmdlRICaptureMode mode) {
  static constexpr const char* fn = "aclmdlRICaptureBegin";
  if (int rc = check_context(fn); rc != ACL_SUCCESS) return rc;
  if (stream == nullptr) {
    return fail(ACL_ERROR_INVALID_PARAM, "aclmdlRICaptureBegin: the default stream cannot be captured");
  }
  if (mode < ACL_MODEL_RI_CAPTURE_MODE_GLOBAL || mode > ACL_MODEL_RI_CAPTURE_MODE_RELAXED) {
    return fail(ACL_ERROR_INVALID_PARAM, strf("%s: invalid capture mode %d", fn, static_cast<int>(mode)));
  }
  if (!soc().capture) {
    return fail(ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                strf("%s: stream capture (model RI) is not supported on %s", fn, soc().name));
  }
  std::shared_ptr<Stream> s;
  if (int rc = find_stream(stream, fn, s); rc != ACL_SUCCESS) return rc;
  std::lock_guard lk(s->mu);
  if (s->capture) return fail(ACL_ERROR_RT_STREAM_CAPTURED, strf("%s: the stream is already capturing", fn));
  s->capture = std::make_shared<Model>();
  return ACL_SUCCESS;
}

MS_EMU_API aclError aclmdlRICaptureEnd(aclrtStream stream, aclmdlRI* modelRI) {
  static constexpr const char* fn = "aclmdlRICaptureEnd";
  if (modelRI == nullptr) return fail(ACL_ERROR_INVALID_PARAM, "aclmdlRICaptureEnd: modelRI is null");
  std::shared_ptr<Stream> s;
  if (int rc = find_stream(stream, fn, s); rc != ACL_SUCCESS) return rc;
  std::shared_ptr<Model> m;
  {
    std::lock_guard lk(s->mu);
    if (!s->capture) {
      return fail(ACL_ERROR_RT_STREAM_NOT_CAPTURED, strf("%s: the stream is not capturing", fn));
    }
    m = std::move(s->capture);
    s->capture.reset();
  }
  Registry& r = reg();
  std::lock_guard lk(r.mu);
  *modelRI = m.get();
  r.models.emplace(m.get(), std::move(m));
  return ACL_SUCCESS;
}

MS_EMU_API aclError aclmdlRIExecuteAsync(aclmdlRI modelRI, aclrtStream stream) {
  static constexpr const char* fn = "aclmdlRIExecuteAsync";
  if (int rc = check_context(fn); rc != ACL_SUCCESS) return rc;
  std::shared_ptr<Model> m;
  {
    Registry& r = reg();
    std::lock_guard lk(r.mu);
    auto it = r.models.find(modelRI);
    if (modelRI == nullptr || it == r.models.end()) {
      return fail(ACL_ERROR_INVALID_RESOURCE_HANDLE, strf("%s: %p is not a live model", fn, modelRI));
    }
    m = it->second;
  }
  Task task;
  task.kind = TaskKind::Replay;
  task.name = fn;
  task.delay_ns = launch_ns();  // one launch for the whole model
  for (const Task& t : m->tasks) {
    for (const AllocRef& ref : t.refs) {
      if (ref->freed.load()) {
        return fail(ACL_ERROR_RT_PARAM_INVALID,
                    strf("%s: the model's %s uses device memory at 0x%zx that was freed after capture",
                         fn, t.name.c_str(), static_cast<size_t>(ref->base)));
      }
    }
    if (t.kind != TaskKind::Kernel) task.delay_ns += t.delay_ns;
  }
  task.body = [m] {
    for (const Task& t : m->tasks) {
      if (int rc = run_task_body(t); rc != ACL_SUCCESS) return rc;
    }
    return ACL_SUCCESS;
  };
  if (int rc = enqueue(stream, std::move(task), fn, nullptr); rc != ACL_SUCCESS) return rc;
  ++counters().capture_replays;
  return ACL_SUCCESS;
}

MS_EMU_API aclError aclmdlRIDestroy(aclmdlRI modelRI) {
  Registry& r = reg();
  std::lock_guard lk(r.mu);
  if (modelRI == nullptr || r.models.erase(modelRI) == 0) {
    return fail(ACL_ERROR_INVALID_RESOURCE_HANDLE, strf("aclmdlRIDestroy: %p is not a live model", modelRI));
  }
  return ACL_SUCCESS;  // replays still queued hold their own reference
}

#endif  // MS_ASCEND_EMULATOR_BUILD
