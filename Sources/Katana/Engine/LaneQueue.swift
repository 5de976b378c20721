/// The updaters waiting in a store's lane, oldest first. Taking a prefix is O(taken): a head index moves, and the
/// storage is compacted only when the taken part is large, so a thread that helps with a long backlog pays for the
/// items it applies, not for the backlog's length.
@usableFromInline
struct LaneQueue {
    @usableFromInline var items: [LaneItem] = []
    /// Items before `head` were taken already.
    @usableFromInline var head = 0
    /// How many queued items each producer slot has (a producer is a thread, hashed to one of 64 slots): the flood
    /// policy makes only producers that already have items queued wait.
    @usableFromInline var queuedBySlot = [UInt32](repeating: 0, count: LaneQueue.slotCount)

    @usableFromInline static let slotCount = 64
    /// Items that count against no producer (re-enqueued ones). A literal (`UInt8.max`): a constant initialised by
    /// a call is read through an accessor call in a debug build, on every append (the queued walk, `make walk`).
    @usableFromInline static let noSlot: UInt8 = 255

    @inlinable init() {}

    /// A producer thread's slot (its id hashed to one of `slotCount`).
    @inlinable static func slot(of thread: UInt) -> UInt8 {
        UInt8(truncatingIfNeeded: (thread &* 0x9E37_79B9_7F4A_7C15) >> 58)
    }

    @inlinable func hasQueued(slot: UInt8) -> Bool { slot != Self.noSlot && queuedBySlot[Int(slot)] > 0 }

    /// How many items wait (`items.count - head`). Stored, and tested as `count == 0` for empty: a debug build calls a
    /// computed property on every read, and the lane reads this on every arrival and batch (the queued walk, `make walk`).
    @usableFromInline private(set) var count = 0

    @inlinable mutating func append(_ item: LaneItem) {
        if item.slot != Self.noSlot { queuedBySlot[Int(item.slot)] &+= 1 }
        items.append(item)
        count &+= 1
    }

    /// Moves up to `limit` of the oldest items into `buffer`, which must be empty.
    @inlinable
    mutating func take(upTo limit: Int, into buffer: inout [LaneItem]) {
        let available = count
        if head == 0, limit >= available {
            swap(&items, &buffer)  // the common case: everything, with no copying
            count = 0
            if available < Self.slotCount {
                // A short batch (the contended case): undo its own counts rather than clear every slot.
                for item in buffer where item.slot != Self.noSlot { queuedBySlot[Int(item.slot)] &-= 1 }
            } else {
                for slot in 0..<Self.slotCount { queuedBySlot[slot] = 0 }
            }
            return
        }
        let taken = Swift.min(limit, available)
        for index in head..<(head &+ taken) where items[index].slot != Self.noSlot {
            queuedBySlot[Int(items[index].slot)] &-= 1
        }
        buffer.append(contentsOf: items[head..<(head &+ taken)])
        head &+= taken
        count &-= taken
        if head == items.count {
            items.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024, head &* 2 >= items.count {
            // Drop the taken prefix (and the references it still holds) once it is at least half the storage.
            items.removeFirst(head)
            head = 0
        }
    }
}
