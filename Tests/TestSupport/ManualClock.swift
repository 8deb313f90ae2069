import Media
import POSIX
import Synchronization

/// A clock that reads what the test set it to, and moves only when the test moves it (swift-nio's
/// `EmbeddedEventLoop.advanceTime(by:)`, Moonfire's simulated clocks): what a test injects where
/// the agent, MQTT, uploads, hooks or the web server read the time (`clock`), so that retries,
/// timeouts and stalls fall due when the test says, never after real seconds.
public final class ManualClock: Sendable {
    private let time: Mutex<Timestamp>

    public init(_ start: Timestamp = .zero) { time = Mutex(start) }

    /// What it reads now.
    public var now: Timestamp { time.withLock { $0 } }

    /// The clock to inject: it reads this one.
    public var clock: Clock { Clock { [self] in now } }

    /// Moves it on by `duration`.
    public func advance(by duration: Timestamp.Duration) {
        time.withLock { $0 = $0 + duration }
    }

    /// Moves it on by `seconds`.
    public func advance(seconds: Double) { advance(by: .init(seconds: seconds)) }

    /// Moves it on to `instant`; an instant it has passed leaves it where it is (a monotonic
    /// clock never goes back).
    public func advance(to instant: Timestamp) {
        time.withLock { $0 = max($0, instant) }
    }
}
