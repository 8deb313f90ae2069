import Foundation

/// GPAC's rule, checked without GPAC (it is not packaged for bookworm): a top-level `free` (or
/// `skip`) box whose first child is an `mfhd`, `traf` or `mvhd` is taken by GPAC for the
/// `moof` or `moov` it once was — MP4Box then finds a movie fragment before any movie and
/// refuses the file ("Movie fragment but no moov (yet)") — and VLC reports a "moov hidden in a
/// free box". Returns each such box as "free at OFFSET holding TYPE"; empty for a clip every
/// reader opens.
public func hiddenBoxesThatLookLive(_ path: String) -> [String] {
    guard let data = FileManager.default.contents(atPath: path) else { return ["cannot read \(path)"] }
    let bytes = [UInt8](data)
    func number(_ range: Range<Int>) -> Int { bytes[range].reduce(0) { $0 << 8 | Int($1) } }
    func type(at offset: Int) -> String { String(decoding: bytes[offset..<offset + 4], as: UTF8.self) }
    var found: [String] = []
    var offset = 0
    while offset + 8 <= bytes.count {
        var size = number(offset..<offset + 4)
        var header = 8
        if size == 1, offset + 16 <= bytes.count {
            size = number(offset + 8..<offset + 16)
            header = 16
        } else if size == 0 {
            size = bytes.count - offset
        }
        guard size >= header else { break }
        let child = offset + header
        if ["free", "skip"].contains(type(at: offset + 4)), child + 8 <= min(bytes.count, offset + size),
            ["mfhd", "traf", "mvhd"].contains(type(at: child + 4))
        {
            found.append("\(type(at: offset + 4)) at \(offset) holding \(type(at: child + 4))")
        }
        offset += size
    }
    return found
}

/// True when the file is a finished movie: its last top-level box is a `moov` that does not
/// announce fragments (no `mvex`), as Vigil's close and repair leave every clip.
public func isFinishedMovie(_ path: String) -> Bool {
    guard let data = FileManager.default.contents(atPath: path) else { return false }
    let bytes = [UInt8](data)
    var offset = 0
    var last: (type: String, range: Range<Int>)?
    while offset + 8 <= bytes.count {
        var size = bytes[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
        if size == 1, offset + 16 <= bytes.count {
            size = bytes[offset + 8..<offset + 16].reduce(0) { $0 << 8 | Int($1) }
        }
        guard size >= 8, offset + size <= bytes.count else { return false }
        last = (String(decoding: bytes[offset + 4..<offset + 8], as: UTF8.self), offset..<offset + size)
        offset += size
    }
    guard let last, last.type == "moov", offset == bytes.count else { return false }
    return !bytes[last.range].windows(4).contains { $0.elementsEqual("mvex".utf8) }
}

extension Array where Element == UInt8 {
    fileprivate func windows(_ n: Int) -> [ArraySlice<UInt8>] {
        count < n ? [] : (0...(count - n)).map { self[$0..<$0 + n] }
    }
}
extension ArraySlice where Element == UInt8 {
    fileprivate func windows(_ n: Int) -> [ArraySlice<UInt8>] {
        count < n ? [] : (startIndex...(endIndex - n)).map { self[$0..<$0 + n] }
    }
}
