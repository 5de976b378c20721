import Glibc

/// Monotonic nanoseconds (CLOCK_MONOTONIC), the time base of every figure katana-bench reports.
@inline(__always)
func nowNanoseconds() -> UInt64 {
    var spec = timespec()
    clock_gettime(CLOCK_MONOTONIC, &spec)
    return UInt64(spec.tv_sec) &* 1_000_000_000 &+ UInt64(spec.tv_nsec)
}

/// Busy-waits for `nanoseconds` (simulated CPU work inside a side effect).
@inline(__always)
func spin(nanoseconds: UInt64) {
    guard nanoseconds > 0 else { return }
    let end = nowNanoseconds() &+ nanoseconds
    while nowNanoseconds() < end {}
}

/// Sleeps the calling thread until the absolute monotonic time `deadline`.
func sleepUntil(_ deadline: UInt64) {
    var spec = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
    while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &spec, nil) == EINTR {}
}
