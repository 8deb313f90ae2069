import Media

// Times written as seconds, for tests that drive the detector, the event logic or the
// recorder with timestamps of their own choosing: `.s(8.03)`.

extension Timestamp {
    public static func s(_ seconds: Double) -> Timestamp { Timestamp(seconds: seconds) }
}

extension Timestamp.Duration {
    public static func s(_ seconds: Double) -> Timestamp.Duration { Timestamp.Duration(seconds: seconds) }
}
