import FoundationEssentials

/// A clip on disk, as retention sees it.
public struct StoredClip: Equatable, Sendable {
    /// Relative to the storage directory.
    public var relativePath: String
    public var size: Int64
    /// Last written: the end of the recording (or its repair).
    public var modified: Date

    public init(relativePath: String, size: Int64, modified: Date) {
        self.relativePath = relativePath
        self.size = size
        self.modified = modified
    }
}

/// Why retention deleted a clip.
public enum DeletionReason: Equatable, Sendable, CustomStringConvertible {
    case olderThan(days: Int)
    case storeLargerThan(bytes: Int64)
    case freeSpaceBelow(bytes: Int64)

    public var description: String {
        switch self {
        case .olderThan(let days): "older than \(days) days"
        case .storeLargerThan(let bytes): "clips take more than \(bytes >> 20) MB"
        case .freeSpaceBelow(let bytes): "less than \(bytes >> 20) MB free"
        }
    }
}

public struct Deletion: Equatable, Sendable {
    public var clip: StoredClip
    public var reason: DeletionReason
}

/// Which clips to delete: oldest first, when older than `maxAgeDays`, while all clips take
/// more than `maxSize`, or while the file system has less than `minFree` free. The clip being
/// written is never among them.
public struct RetentionPolicy: Equatable, Sendable {
    public var maxAgeDays: Int?
    public var maxSize: Int64?
    public var minFree: Int64

    public init(maxAgeDays: Int?, maxSize: Int64?, minFree: Int64) {
        self.maxAgeDays = maxAgeDays
        self.maxSize = maxSize
        self.minFree = minFree
    }

    public func deletions(clips: [StoredClip], now: Date, freeBytes: Int64, protected: Set<String>) -> [Deletion] {
        var candidates = clips.filter { !protected.contains($0.relativePath) }
            .sorted { ($0.modified, $0.relativePath) < ($1.modified, $1.relativePath) }
        var result: [Deletion] = []
        var total = clips.reduce(0) { $0 + $1.size }
        var free = freeBytes
        func take(_ reason: DeletionReason) {
            let clip = candidates.removeFirst()
            total -= clip.size
            free += clip.size
            result.append(Deletion(clip: clip, reason: reason))
        }
        if let days = maxAgeDays {
            let cutoff = now.addingTimeInterval(-Double(days) * 86_400)
            while let first = candidates.first, first.modified < cutoff { take(.olderThan(days: days)) }
        }
        if let maxSize {
            while total > maxSize, !candidates.isEmpty { take(.storeLargerThan(bytes: maxSize)) }
        }
        while free < minFree, !candidates.isEmpty { take(.freeSpaceBelow(bytes: minFree)) }
        return result
    }
}

/// The storage directory: finds the agent's own clips (by their name pattern, never through
/// a symbolic link), deletes them, and measures free space.
public struct ClipStore: Sendable {
    public let root: String
    public let naming: ClipNaming

    public init(root: String, naming: ClipNaming) {
        self.root = root
        self.naming = naming
    }

    public struct StoreError: Error, CustomStringConvertible, Sendable {
        public var description: String
    }

    public func absolutePath(_ relative: String) -> String { root + "/" + relative }

    /// Every regular file under the root whose relative path the naming pattern makes.
    /// Symbolic links, to files or directories, are neither listed nor followed.
    public func clips() throws(StoreError) -> [StoredClip] {
        var found: [StoredClip] = []
        let fm = FileManager.default
        func walk(_ relative: String, depth: Int) {
            guard depth < 8 else { return }
            let dir = relative.isEmpty ? root : absolutePath(relative)
            guard let names = try? fm.contentsOfDirectory(atPath: dir) else { return }
            for name in names.sorted() {
                let rel = relative.isEmpty ? name : relative + "/" + name
                guard let attributes = try? fm.attributesOfItem(atPath: absolutePath(rel)), // lstat: links are not followed
                      let type = attributes[.type] as? FileAttributeType else { continue }
                if type == .typeDirectory {
                    walk(rel, depth: depth + 1)
                } else if type == .typeRegular, naming.matches(rel) {
                    found.append(StoredClip(relativePath: rel,
                                            size: int64(attributes[.size]) ?? 0,
                                            modified: attributes[.modificationDate] as? Date ?? Date.distantPast))
                }
            }
        }
        var isDirectory = false
        guard fm.fileExists(atPath: root, isDirectory: &isDirectory), isDirectory else {
            throw StoreError(description: "the storage directory \(root) does not exist")
        }
        walk("", depth: 0)
        return found
    }

    /// Bytes free for this user on the storage file system.
    public func freeBytes() throws(StoreError) -> Int64 {
        do {
            let attributes = try FileManager.default.attributesOfFileSystem(forPath: root)
            return int64(attributes[.systemFreeSize]) ?? 0
        } catch {
            throw StoreError(description: "cannot read the free space of \(root): \(describeFileError(error))")
        }
    }

    /// Deletes one clip, after checking again that it is a regular file of ours (not a link),
    /// then the directories the pattern made for it if they are now empty.
    public func delete(_ clip: StoredClip) throws(StoreError) {
        let fm = FileManager.default
        let path = absolutePath(clip.relativePath)
        guard naming.matches(clip.relativePath), !clip.relativePath.split(separator: "/").contains(".."),
              let type = (try? fm.attributesOfItem(atPath: path))?[.type] as? FileAttributeType, type == .typeRegular else {
            throw StoreError(description: "refusing to delete \(path): it is not a clip file of this agent")
        }
        do { try fm.removeItem(atPath: path) } catch {
            throw StoreError(description: "cannot delete \(path): \(describeFileError(error))")
        }
        var parts = clip.relativePath.split(separator: "/").dropLast()
        while !parts.isEmpty {
            let dir = absolutePath(parts.joined(separator: "/"))
            guard let entries = try? fm.contentsOfDirectory(atPath: dir), entries.isEmpty,
                  (try? fm.attributesOfItem(atPath: dir))?[.type] as? FileAttributeType == .typeDirectory else { break }
            try? fm.removeItem(atPath: dir)
            parts = parts.dropLast()
        }
    }

    /// Applies `policy` now: returns what it deleted, and the problems it met.
    public func sweep(_ policy: RetentionPolicy, now: Date = Date(), protected: Set<String>) -> (deleted: [Deletion], errors: [StoreError]) {
        let clips: [StoredClip]
        let free: Int64
        do {
            clips = try self.clips()
            free = try freeBytes()
        } catch {
            return ([], [error])
        }
        var deleted: [Deletion] = []
        var errors: [StoreError] = []
        for deletion in policy.deletions(clips: clips, now: now, freeBytes: free, protected: protected) {
            do {
                try delete(deletion.clip)
                deleted.append(deletion)
            } catch {
                errors.append(error)
            }
        }
        return (deleted, errors)
    }
}

/// A file attribute's number: FoundationEssentials gives `UInt` or `UInt64`, or an `NSNumber`
/// when Foundation is loaded too (as in the tests).
private func int64(_ value: Any?) -> Int64? {
    if let number = value as? any BinaryInteger { return Int64(clamping: number) }
    if let number = value as? Int64 { return number }
    return nil
}
