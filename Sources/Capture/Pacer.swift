import Media
internal import POSIX

/// Delivers frames no earlier than their timestamps say, relative to the first one: a real
/// wait on the monotonic clock (a file read in real time).
struct Pacer {
    private var anchor: (clock: Timestamp, media: Timestamp)?

    /// Waits until `media` is due: the first call sets the anchor and returns at once.
    mutating func wait(for media: Timestamp) {
        guard let anchor else {
            self.anchor = (Clock.monotonic.now(), media)
            return
        }
        Clock.sleep(untilMonotonic: anchor.clock + (media - anchor.media))
    }
}
