// Opt-in reuse of large CPU buffers: FHE_CORE_CPU_CACHE_MB=<megabytes> at process start.
//
// Key switching at N = 2^16 allocates and frees ~250 MB of tensors per HMult (ModUp's digits,
// the inner product's output, ModDown's temporaries). glibc serves blocks above its mmap threshold
// (at most 32 MiB) with fresh mappings and returns them on free, so every call pays the first-touch
// page faults again: on the 2-vCPU VMs we measure, 0.3-0.5 ms per MB, which made up a third of
// HMult + relin once the arithmetic was vectorised. With the variable set, torch's CPU allocator is
// wrapped: blocks of at least 1 MiB are kept on free (up to the given total, exact-size reuse) and
// handed out again. It is process-wide (every CPU tensor goes through it), which is why it is off
// unless asked for: a server worker that owns the process is the intended user.
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include <cstdlib>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace fhe::cpu {
namespace {

constexpr size_t kMinCachedBytes = size_t{1} << 20;

class LargeBlockCache final : public c10::Allocator {
 public:
  explicit LargeBlockCache(size_t limit_bytes) : limit_(limit_bytes) {}

  c10::DataPtr allocate(size_t n) override {
    void* p = n >= kMinCachedBytes ? take(n) : nullptr;
    if (p == nullptr) p = c10::alloc_cpu(n);
    if (n >= kMinCachedBytes) {
      std::lock_guard<std::mutex> lock(mutex_);
      live_[p] = n;
    }
    return {p, p, &release, c10::Device(c10::DeviceType::CPU)};
  }

  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }

  static LargeBlockCache* instance;

 private:
  void* take(size_t n) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = free_.find(n);
    if (it == free_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    cached_ -= n;
    return p;
  }

  static void release(void* p) {
    if (p == nullptr) return;
    LargeBlockCache& self = *instance;
    {
      std::lock_guard<std::mutex> lock(self.mutex_);
      auto it = self.live_.find(p);
      if (it != self.live_.end()) {
        const size_t n = it->second;
        self.live_.erase(it);
        if (self.cached_ + n <= self.limit_) {
          self.free_[n].push_back(p);
          self.cached_ += n;
          return;
        }
      }
    }
    c10::free_cpu(p);
  }

  const size_t limit_;
  std::mutex mutex_;
  std::unordered_map<void*, size_t> live_;                 // large blocks handed out
  std::unordered_map<size_t, std::vector<void*>> free_;    // kept blocks by size
  size_t cached_ = 0;
};

LargeBlockCache* LargeBlockCache::instance = nullptr;

// Installed when the extension loads; never destroyed (tensors may outlive static destructors).
const bool kCacheInstalled = [] {
  const char* mb = std::getenv("FHE_CORE_CPU_CACHE_MB");
  const long long limit = mb != nullptr ? std::atoll(mb) : 0;
  if (limit <= 0) return false;
  LargeBlockCache::instance = new LargeBlockCache(static_cast<size_t>(limit) << 20);
  c10::SetCPUAllocator(LargeBlockCache::instance, /*priority=*/1);
  return true;
}();

}  // namespace
}  // namespace fhe::cpu
