import Recorder

extension ClipStorage {
    /// Enters a saved clip as the agent does: its line in the events journal and its entry in
    /// the catalogue (a picture of `pictureBytes` beside it).
    public func enter(_ record: ClipRecord, pictureBytes: Int64 = 0) throws {
        try EventsJournal(storage: self).append(record)
        try openCatalogue().add(CatalogueEntry(record: record, pictureBytes: pictureBytes))
    }
}
