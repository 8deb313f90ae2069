import Testing
@testable import vigil

/// The queues between the agent's threads hold frames of several MB each: whatever they hand
/// out must be theirs no longer, or a long run pins every frame that passed through.
@Suite struct WorkQueueTests {
    final class Payload: Sendable {}

    @Test func aPoppedElementIsNotKeptByTheQueue() {
        let queue = WorkQueue<Payload>(capacity: 8)
        weak var released: Payload?
        do {
            let payload = Payload()
            released = payload
            queue.push(payload)
            queue.push(Payload())
        }
        #expect(released != nil)
        _ = queue.pop()
        #expect(released == nil, "the queue still holds an element it has handed out")
        #expect(queue.count == 1)
    }

    @Test func dropOldestFreesWhatItDrops() {
        let queue = WorkQueue<Payload>(capacity: 8)
        weak var dropped: Payload?
        do {
            let payload = Payload()
            dropped = payload
            queue.push(payload)
        }
        _ = queue.dropOldest { _ in true }
        #expect(dropped == nil)
        #expect(queue.count == 0 && queue.load == 0)
    }

    /// Many pushes and pops (past the batch in which popped slots are cut off) keep order and cost.
    @Test func orderAndLoadSurviveCompaction() {
        let queue = WorkQueue<Int>(capacity: 1000)
        var next = 0
        for round in 0..<50 {
            for i in 0..<7 { queue.push(round * 7 + i, cost: 3) }
            for _ in 0..<(round % 2 == 0 ? 5 : 9) where queue.count > 0 {
                #expect(queue.pop() == next)
                next += 1
            }
        }
        #expect(queue.load == queue.count * 3)
        queue.close()
        while let v = queue.pop() {
            #expect(v == next)
            next += 1
        }
        #expect(next == 350)
    }
}
