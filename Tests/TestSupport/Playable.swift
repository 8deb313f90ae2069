import Testing

/// Every movie a test writes goes through the independent readers: ffprobe reads it, and a
/// full decode by ffmpeg prints nothing. Returns ffprobe's report.
@discardableResult
public func expectPlayable(
    _ path: String, _ comment: String = "", sourceLocation: SourceLocation = #_sourceLocation
) throws -> ProbeReport? {
    // A finished clip must open in every reader, GPAC's and VLC's heuristics included.
    if isFinishedMovie(path) {
        let lookLive = hiddenBoxesThatLookLive(path)
        #expect(
            lookLive.isEmpty, "\(comment) \(path) hides boxes that look live: \(lookLive)",
            sourceLocation: sourceLocation)
    }
    let decode = try FFmpeg.decodeErrors(path)
    #expect(decode.isEmpty, "\(comment) \(path) does not decode cleanly: \(decode)", sourceLocation: sourceLocation)
    do {
        let probe = try FFprobe.probe(path)
        #expect(probe.video != nil, "\(comment) \(path) has no video stream", sourceLocation: sourceLocation)
        return probe
    } catch {
        Issue.record("\(comment) ffprobe cannot read \(path): \(error)", sourceLocation: sourceLocation)
        return nil
    }
}
