import Foundation

/// The top-level boxes of a file's bytes, read independently of the writer's code: where each
/// starts, its declared size (a 64-bit one when the 32-bit size is 1; to the end of the file
/// when it is 0), its header's length and its type. A last box that runs past the end is
/// listed with its declared size; the walk stops there, or at a size too small to be a box.
public func topLevelBoxes(_ bytes: [UInt8]) -> [(offset: Int, size: Int, header: Int, type: String)] {
    func number(_ range: Range<Int>) -> Int { bytes[range].reduce(0) { $0 << 8 | Int($1) } }
    var boxes: [(offset: Int, size: Int, header: Int, type: String)] = []
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
        boxes.append((offset, size, header, String(decoding: bytes[offset + 4..<offset + 8], as: UTF8.self)))
        guard size >= header, offset + size <= bytes.count else { break }
        offset += size
    }
    return boxes
}

/// The types of the top-level boxes of the file at `path`.
public func topLevelTypes(_ path: String) -> [String] {
    topLevelBoxes(fileContents(path)).map(\.type)
}

private func fileContents(_ path: String) -> [UInt8] {
    FileManager.default.contents(atPath: path).map { [UInt8]($0) } ?? []
}

/// GPAC's rule, checked without GPAC (it is not packaged for bookworm): a top-level `free` (or
/// `skip`) box whose first child is an `mfhd`, `traf` or `mvhd` is taken by GPAC for the
/// `moof` or `moov` it once was — MP4Box then finds a movie fragment before any movie and
/// refuses the file ("Movie fragment but no moov (yet)") — and VLC reports a "moov hidden in a
/// free box". Returns each such box as "free at OFFSET holding TYPE"; empty for a clip every
/// reader opens.
public func hiddenBoxesThatLookLive(_ path: String) -> [String] {
    guard let data = FileManager.default.contents(atPath: path) else { return ["cannot read \(path)"] }
    let bytes = [UInt8](data)
    func type(at offset: Int) -> String { String(decoding: bytes[offset..<offset + 4], as: UTF8.self) }
    return topLevelBoxes(bytes).compactMap { box in
        let child = box.offset + box.header
        guard ["free", "skip"].contains(box.type), child + 8 <= min(bytes.count, box.offset + box.size),
            ["mfhd", "traf", "mvhd"].contains(type(at: child + 4))
        else { return nil }
        return "\(box.type) at \(box.offset) holding \(type(at: child + 4))"
    }
}

/// True when the file is a finished movie: its last top-level box is a `moov` that does not
/// announce fragments (no `mvex`), as Vigil's close and repair leave every clip, and no live
/// `moof` or `moov` comes before it (a close stopped part-way).
public func isFinishedMovie(_ path: String) -> Bool {
    let bytes = fileContents(path)
    let boxes = topLevelBoxes(bytes)
    guard let last = boxes.last, last.type == "moov", last.offset + last.size == bytes.count,
        !boxes.dropLast().contains(where: { ["moof", "moov"].contains($0.type) })
    else { return false }
    return !bytes[last.offset..<bytes.count].windows(4).contains { $0.elementsEqual("mvex".utf8) }
}

extension ArraySlice where Element == UInt8 {
    fileprivate func windows(_ n: Int) -> [ArraySlice<UInt8>] {
        count < n ? [] : (startIndex...(endIndex - n)).map { self[$0..<$0 + n] }
    }
}
