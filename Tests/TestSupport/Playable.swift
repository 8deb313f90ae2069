import Testing

/// Every movie a test writes goes through the independent readers: ffprobe reads it, and a
/// full decode by ffmpeg prints nothing. Returns ffprobe's report.
@discardableResult
public func expectPlayable(
    _ path: String, _ comment: String = "", sourceLocation: SourceLocation = #_sourceLocation
) throws -> ProbeReport? {
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
