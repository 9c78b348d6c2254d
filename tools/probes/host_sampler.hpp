#pragma once
// A sampling profiler of the host for the probes, for machines without perf: with PROBE_PROFILE=FILE set, every 50
// us of the process's CPU time a SIGPROF records the interrupted thread's call stack (glibc's backtrace, through the
// unwind tables); stop() writes one line of hexadecimal return addresses per sample to FILE and the process's
// mappings to FILE.maps, which tools/probes/symbolize_samples.py turns into the functions that took the time
// (self and inclusive). Only samples of threads inside a Scope are kept (the probe's timed enqueue loop, say, not its
// waits and set-up). Nothing happens without PROBE_PROFILE.
#include <execinfo.h>
#include <signal.h>
#include <time.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

namespace probe {

class HostSampler {
 public:
  /// Samples are kept only while the interrupted thread is inside one of these.
  struct Scope {
    Scope() { inside() = true; }
    ~Scope() { inside() = false; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
  };

  void start() {
    const char* path = std::getenv("PROBE_PROFILE");
    if (path == nullptr || *path == '\0') return;
    path_ = path;
    samples_.assign(kCapacity, Sample{});
    instance() = this;
    void* warm[4];
    backtrace(warm, 4);  // loads libgcc's unwinder now, not in the handler
    struct sigaction action {};
    action.sa_handler = &HostSampler::on_signal;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    sigaction(SIGPROF, &action, nullptr);
    sigevent event{};
    event.sigev_notify = SIGEV_SIGNAL;
    event.sigev_signo = SIGPROF;
    if (timer_create(CLOCK_PROCESS_CPUTIME_ID, &event, &timer_) != 0) {
      std::perror("timer_create");
      return;
    }
    itimerspec every{};
    every.it_interval.tv_nsec = 50'000;
    every.it_value.tv_nsec = 50'000;
    timer_settime(timer_, 0, &every, nullptr);
    running_ = true;
  }

  void stop() {
    if (!running_) return;
    running_ = false;
    itimerspec off{};
    timer_settime(timer_, 0, &off, nullptr);
    timer_delete(timer_);
    signal(SIGPROF, SIG_IGN);
    const std::size_t taken = std::min<std::size_t>(next_.load(), kCapacity);
    std::FILE* out = std::fopen(path_.c_str(), "w");
    if (out == nullptr) return;
    for (std::size_t i = 0; i < taken; ++i) {
      for (int f = 0; f < samples_[i].depth; ++f) std::fprintf(out, "%p ", samples_[i].frames[f]);
      std::fputc('\n', out);
    }
    std::fclose(out);
    std::ifstream maps("/proc/self/maps");
    std::ofstream copy(path_ + ".maps");
    copy << maps.rdbuf();
    std::fprintf(stderr, "host sampler: %zu samples into %s\n", taken, path_.c_str());
  }

 private:
  static constexpr std::size_t kCapacity = 400'000;
  static constexpr int kDepth = 40;
  struct Sample {
    void* frames[kDepth];
    int depth = 0;
  };

  static HostSampler*& instance() {
    static HostSampler* current = nullptr;
    return current;
  }

  // volatile: the signal handler reads it between any two instructions, which the compiler must not reorder past.
  static volatile bool& inside() {
    static thread_local volatile bool flag = false;
    return flag;
  }

  static void on_signal(int) {
    HostSampler* self = instance();
    if (self == nullptr || !inside()) return;
    const std::size_t index = self->next_.fetch_add(1, std::memory_order_relaxed);
    if (index >= kCapacity) return;
    Sample& sample = self->samples_[index];
    sample.depth = backtrace(sample.frames, kDepth);
  }

  std::string path_;
  std::vector<Sample> samples_;
  std::atomic<std::size_t> next_{0};
  timer_t timer_{};
  bool running_ = false;
};

}  // namespace probe
