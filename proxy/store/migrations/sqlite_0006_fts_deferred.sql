-- Messages are indexed for full-text search in batches, not one by one in the
-- transaction that stores them: FTS5 writes a new index segment per
-- transaction, which made indexing ~30% of a turn's cost. New messages are
-- queued in fts_pending (a cheap insert) and indexed by the store's
-- index_pending(), which the server runs every fraction of a second and
-- every search runs first, so searches always see every stored message.
CREATE TABLE fts_pending (id INTEGER PRIMARY KEY);

DROP TRIGGER messages_fts_insert;
CREATE TRIGGER messages_fts_queue AFTER INSERT ON messages BEGIN
    INSERT INTO fts_pending (id) VALUES (new.id);
END;

DROP TRIGGER messages_fts_delete;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content)
        SELECT 'delete', old.id, old.content
        WHERE NOT EXISTS (SELECT 1 FROM fts_pending WHERE id = old.id);
    DELETE FROM fts_pending WHERE id = old.id;
END;

DROP TRIGGER messages_fts_update;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages
WHEN NOT EXISTS (SELECT 1 FROM fts_pending WHERE id = old.id) BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
END;
