-- hermes-proxy SQLite schema, version 5: the recall index.
--
-- Recall searches one session's archive on every turn, so its cost must not
-- grow with the rest of the database. recall_fts indexes user and assistant
-- messages under rowid = (key << 24) + seq, where key numbers each session
-- once (AUTOINCREMENT: never reused), so one session's messages hold a
-- contiguous rowid range and a query reads only that range of each term's
-- postings. The index is contentless: the text stays in messages.
CREATE TABLE recall_sessions (
    key        INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id TEXT NOT NULL UNIQUE
);

CREATE VIRTUAL TABLE recall_fts USING fts5(
    content, content='', tokenize='porter unicode61'
);

INSERT INTO recall_sessions (session_id) SELECT id FROM sessions ORDER BY started_at, id;

INSERT INTO recall_fts (rowid, content)
    SELECT (r.key << 24) + m.seq, m.content
    FROM messages m JOIN recall_sessions r ON r.session_id = m.session_id
    WHERE m.role IN ('user', 'assistant') AND m.content <> '' AND m.seq < 16777216;

CREATE TRIGGER recall_sessions_insert AFTER INSERT ON sessions BEGIN
    INSERT INTO recall_sessions (session_id) VALUES (new.id);
END;

-- Rows of recall_sessions outlive their session (a few bytes each): the delete
-- trigger below needs the key while a session's messages are being removed.
CREATE TRIGGER recall_fts_insert AFTER INSERT ON messages
WHEN new.role IN ('user', 'assistant') AND new.content <> '' AND new.seq < 16777216 BEGIN
    INSERT INTO recall_fts (rowid, content)
        SELECT (key << 24) + new.seq, new.content FROM recall_sessions
        WHERE session_id = new.session_id;
END;

CREATE TRIGGER recall_fts_delete AFTER DELETE ON messages
WHEN old.role IN ('user', 'assistant') AND old.content <> '' AND old.seq < 16777216 BEGIN
    INSERT INTO recall_fts (recall_fts, rowid, content)
        SELECT 'delete', (key << 24) + old.seq, old.content FROM recall_sessions
        WHERE session_id = old.session_id;
END;

CREATE TRIGGER recall_fts_update AFTER UPDATE OF content ON messages
WHEN old.role IN ('user', 'assistant') AND old.seq < 16777216 BEGIN
    INSERT INTO recall_fts (recall_fts, rowid, content)
        SELECT 'delete', (key << 24) + old.seq, old.content FROM recall_sessions
        WHERE session_id = old.session_id AND old.content <> '';
    INSERT INTO recall_fts (rowid, content)
        SELECT (key << 24) + new.seq, new.content FROM recall_sessions
        WHERE session_id = new.session_id AND new.content <> '';
END;
