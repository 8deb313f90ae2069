import Media
import TestSupport
import Testing

/// `Retry`, driven with chosen timestamps: the backoff of the camera (up to 30 s), the
/// microphone (up to 60 s), a full disk (1 s, constant), uploads (up to 10 minutes) and the
/// broker (its waits capped by the kind of failure), and what is said about an outage.
@Suite struct RetryTests {
    /// Fails `count` times, one second apart from `start`; the delays each failure gives.
    static func delays(_ retry: inout Retry, failures count: Int, from start: Double = 0) -> [Double] {
        (0..<count).map { retry.failed(at: .s(start + Double($0))).retryIn.seconds }
    }

    @Test(arguments: [
        (30.0, [1.0, 2, 4, 8, 16, 30, 30, 30]),
        (60.0, [1.0, 2, 4, 8, 16, 32, 60, 60]),
    ])
    func delaysDoubleUpToTheMaximum(maximum: Double, expected: [Double]) {
        var retry = Retry(maximum: .s(maximum))
        #expect(retry.delay == .s(1), "before any failure")
        #expect(Self.delays(&retry, failures: expected.count) == expected)
        #expect(retry.delay == .s(maximum))
    }

    /// The disk's: retention at most once a second however long it stays full.
    @Test func aFirstDelayEqualToTheMaximumStaysConstant() {
        var retry = Retry(first: .s(1), maximum: .s(1))
        #expect(Self.delays(&retry, failures: 6) == [1, 1, 1, 1, 1, 1])
    }

    /// A maximum below the first delay is taken as the first delay.
    @Test func aMaximumBelowTheFirstDelayIsTheFirstDelay() {
        var retry = Retry(first: .s(2), maximum: .s(1))
        #expect(retry.maximum == .s(2))
        #expect(Self.delays(&retry, failures: 3) == [2, 2, 2])
    }

    @Test func onlyTheFailureThatStartsAnOutageIsFirst() {
        var retry = Retry(maximum: .s(30))
        #expect(!retry.isFailing && retry.failingSince == nil)
        let first = retry.failed(at: .s(10))
        #expect(first == Retry.Failure(isFirst: true, retryIn: .s(1)))
        #expect(retry.isFailing && retry.failingSince == .s(10))
        for t in [11.0, 13, 17] {
            #expect(!retry.failed(at: .s(t)).isFirst, "a retry at \(t) s is not a new outage")
        }
        #expect(retry.failingSince == .s(10), "the outage still began at its first failure")
    }

    /// The recovery says how long it was down (from the first failure) and how many tries it
    /// took: the failed retries and the one that worked, not the failure that began it.
    @Test func successReportsTheOutage() {
        var retry = Retry(maximum: .s(30))
        _ = retry.failed(at: .s(100))  // the camera is lost
        _ = retry.failed(at: .s(101))  // try 1 fails
        _ = retry.failed(at: .s(103))  // try 2 fails
        let recovery = retry.succeeded(at: .s(107.5))  // try 3 works
        #expect(recovery == Retry.Recovery(down: .s(7.5), tries: 3))
        #expect(!retry.isFailing && retry.failingSince == nil && retry.tries == 0)
    }

    @Test func theFirstTryThatWorksCountsAsOne() {
        var retry = Retry(maximum: .s(30))
        _ = retry.failed(at: .s(5))
        #expect(retry.succeeded(at: .s(6)) == Retry.Recovery(down: .s(1), tries: 1))
    }

    @Test func successWithNothingFailingIsNoRecovery() {
        var retry = Retry(maximum: .s(30))
        #expect(retry.succeeded(at: .s(1)) == nil)
        _ = retry.failed(at: .s(2))
        #expect(retry.succeeded(at: .s(3)) != nil)
        #expect(retry.succeeded(at: .s(4)) == nil, "the outage was reported once")
    }

    /// After a recovery, the next failure is a new outage: said again, from the first delay,
    /// and its length and tries counted afresh.
    @Test func aFailureAfterASuccessStartsANewOutage() {
        var retry = Retry(maximum: .s(30))
        #expect(Self.delays(&retry, failures: 5) == [1, 2, 4, 8, 16])
        _ = retry.succeeded(at: .s(5))
        #expect(retry.delay == .s(1))
        let again = retry.failed(at: .s(50))
        #expect(again == Retry.Failure(isFirst: true, retryIn: .s(1)))
        #expect(retry.failed(at: .s(51)).retryIn == .s(2))
        #expect(retry.succeeded(at: .s(52)) == Retry.Recovery(down: .s(2), tries: 2))
    }

    /// The broker's waits: one backoff whose cap depends on the failure (5 s for a broker not
    /// there, 60 s for a login refused), doubling on from where the last failure left it.
    @Test func aCapPerFailureLimitsThatWaitOnly() {
        var retry = Retry(maximum: .s(60))
        let five = Timestamp.Duration.s(5)
        let waits = (0..<5).map { retry.failed(at: .s(Double($0)), upTo: five).retryIn.seconds }
        #expect(waits == [1, 2, 4, 5, 5])
        #expect(retry.failed(at: .s(5)).retryIn == .s(10), "uncapped, it doubles from the last wait")
        #expect(retry.failed(at: .s(6), upTo: .s(200)).retryIn == .s(20), "a cap above the maximum is the maximum")
        #expect(retry.failed(at: .s(7), upTo: .s(0.5)).retryIn == .s(1), "never below the first wait")
    }

    /// Forgetting an outage: nothing to say, and the next failure starts one from the first wait.
    @Test func aResetForgetsTheOutage() {
        var retry = Retry(maximum: .s(30))
        _ = retry.failed(at: .s(1))
        _ = retry.failed(at: .s(2))
        #expect(retry.failures == 2 && retry.delay == .s(2))
        retry.reset()
        #expect(!retry.isFailing && retry.failures == 0 && retry.delay == .s(1))
        #expect(retry.succeeded(at: .s(3)) == nil)
        #expect(retry.failed(at: .s(4)) == Retry.Failure(isFirst: true, retryIn: .s(1)))
    }
}
