import Foundation

/// Waits until `condition` holds (checked every millisecond) or `seconds` pass. A liveness bound, not a timing
/// claim: it returns as soon as the condition holds, so the bound is wide — under ThreadSanitizer the Swift runtime's
/// metadata lock has stalled the whole process for tens of seconds (10 s was once not enough for 800 side effects).
///
/// The bound counts the time this check got to run, not time the cooperative pool was frozen: a wake-up that comes
/// late counts as at most 50 ms. A CI run of the TSan suite froze the pool for ~140 s at start-up (every test,
/// however small, took 142 s or more), and two checks started before it ran out of a wall-clock bound with the
/// work they waited for still queued behind the freeze. Nothing is lost: while the pool is frozen this loop cannot
/// run either, so it could never have reported a hang sooner.
public func eventually(seconds: Double = 120, _ condition: @Sendable () -> Bool) async -> Bool {
    var waited = 0.0
    while waited < seconds {
        if condition() { return true }
        let before = Date()
        try? await Task.sleep(nanoseconds: 1_000_000)
        waited += min(Date().timeIntervalSince(before), 0.05)
    }
    return condition()
}
