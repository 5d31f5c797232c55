import Dispatch
import SystemSupport
import Testing

@Suite("Locked", .timeLimit(.minutes(1)))
struct LockedTests {
    @Test("Exclusive: four threads adding 100,000 times each lose no increment")
    func exclusive() {
        let counter = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            for _ in 0..<100_000 { counter.withLock { $0 += 1 } }
        }
        #expect(counter.withLock { $0 } == 400_000)
    }

    @Test("Copies share one value; a typed throw leaves the lock usable")
    func sharedAndThrowing() {
        struct Refused: Error {}
        let a = Locked([1])
        let b = a
        b.withLock { $0.append(2) }
        #expect(a.withLock { $0 } == [1, 2])
        #expect(throws: Refused.self) { try a.withLock { (_: inout [Int]) throws(Refused) in throw Refused() } }
        #expect(a.withLock { $0.count } == 2)
    }
}
