/// Bounds on a clip's path below the storage directory, which `storage.file_pattern` makes.
/// The configuration check refuses a pattern that could go past them, and the storage
/// directory's walk goes exactly `maximumComponents` deep: every clip the agent can write is
/// one that retention finds.
public enum ClipPathLimits {
    /// Components of a clip's relative path, the file name included: at most 7 directory
    /// levels above the file.
    public static let maximumComponents = 8
    /// Bytes of one component: Linux's NAME_MAX (ext4's limit; a name of 255 bytes also fits
    /// the 255 characters of vfat and exFAT).
    public static let maximumComponentBytes = 255
    /// How far the clip writer counts the `-N` it puts before `.mov` to tell apart clips that
    /// would get the same name: a file name may grow by `-1000`.
    public static let maximumCollisionSuffix = 1000
}
