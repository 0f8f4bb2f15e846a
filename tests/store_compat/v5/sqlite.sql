BEGIN TRANSACTION;
CREATE TABLE agent_chat_claims (
    session_id TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    active_run_id TEXT,
    PRIMARY KEY (session_id, chat_id)
);
INSERT INTO "agent_chat_claims" VALUES('s1','c2',NULL);
INSERT INTO "agent_chat_claims" VALUES('s1','c1','r2');
CREATE TABLE agent_run_events (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        chunk TEXT NOT NULL,
        expires_at REAL,
        PRIMARY KEY (run_id, seq)
    );
INSERT INTO "agent_run_events" VALUES('r1',1,'{"type":"start","messageId":"m5"}',4894430411.0);
INSERT INTO "agent_run_events" VALUES('r1',2,'{"type":"text-delta","id":"t","delta":"A"}',4894430411.0);
CREATE TABLE agent_run_messages (
    session_id TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    PRIMARY KEY (session_id, chat_id, message_id)
);
INSERT INTO "agent_run_messages" VALUES('s1','c2','m4','r1');
INSERT INTO "agent_run_messages" VALUES('s1','c1','m6','r2');
CREATE TABLE agent_runs (
        id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        started_key TEXT NOT NULL,
        status TEXT NOT NULL,
        data TEXT NOT NULL
    );
INSERT INTO "agent_runs" VALUES('r1','s1','c2','2025-03-01T12:00:09.000000Z#r1','completed','{"id": "r1", "sessionId": "s1", "chatId": "c2", "userId": "alice", "messageId": "m4", "assistantMessageId": "m5", "modelId": "scripted/default", "startedAt": "2025-03-01T12:00:09+00:00", "status": "completed", "error": null, "steps": 1, "modelCalls": 1, "usage": {"inputTokens": 10, "outputTokens": 2, "cacheReadTokens": 0, "cacheWriteTokens": 0}, "costUsd": null, "finishedAt": "2025-03-01T12:00:11+00:00", "cancelRequested": false, "lastSeq": 2, "checkpoint": null, "reverted": false, "revert": null, "continuedParts": null}');
INSERT INTO "agent_runs" VALUES('r2','s1','c1','2025-03-01T12:00:12.000000Z#r2','running','{"id": "r2", "sessionId": "s1", "chatId": "c1", "userId": "alice", "messageId": "m6", "assistantMessageId": "m7", "modelId": "scripted/default", "startedAt": "2025-03-01T12:00:12+00:00", "status": "running", "error": null, "steps": 0, "modelCalls": 0, "usage": {"inputTokens": 0, "outputTokens": 0, "cacheReadTokens": 0, "cacheWriteTokens": 0}, "costUsd": null, "finishedAt": null, "cancelRequested": false, "lastSeq": 0, "checkpoint": null, "reverted": false, "revert": null, "continuedParts": null}');
CREATE TABLE audit (
        session_id TEXT NOT NULL,
        sk TEXT NOT NULL,
        data TEXT NOT NULL,
        PRIMARY KEY (session_id, sk)
    ) WITHOUT ROWID;
INSERT INTO "audit" VALUES('s1','E#2025-03-01T12:00:00+00:00#e1','{"id":"e1","sessionId":"s1","at":"2025-03-01T12:00:00Z","type":"session.created","detail":{}}');
INSERT INTO "audit" VALUES('s1','E#2025-03-01T12:00:05+00:00#e2','{"id":"e2","sessionId":"s1","at":"2025-03-01T12:00:05Z","type":"session.renamed","detail":{}}');
INSERT INTO "audit" VALUES('s1','E#2025-03-01T12:00:08+00:00#e3','{"id":"e3","sessionId":"s1","at":"2025-03-01T12:00:08Z","type":"test.event","detail":{"n":1}}');
CREATE TABLE chats (
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    id TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (session_id, id),
    UNIQUE (user_id, id)
) WITHOUT ROWID;
INSERT INTO "chats" VALUES('alice','s1','c1','{"id":"c1","sessionId":"s1","title":"Parse it","titleSource":"auto","modelId":null,"activeStreamId":"r2","lastAssistantMessageAt":"2025-03-01T12:00:04Z","messageCount":4,"shareId":"share-1","createdAt":"2025-03-01T12:00:00Z","updatedAt":"2025-03-01T12:00:12Z"}');
INSERT INTO "chats" VALUES('alice','s1','c2','{"id":"c2","sessionId":"s1","title":"Second chat","titleSource":"generated","modelId":null,"activeStreamId":null,"lastAssistantMessageAt":"2025-03-01T12:00:10Z","messageCount":2,"shareId":null,"createdAt":"2025-03-01T12:00:01Z","updatedAt":"2025-03-01T12:00:10Z"}');
CREATE TABLE counters (
        user_id TEXT NOT NULL,
        key TEXT NOT NULL,
        hits INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        PRIMARY KEY (user_id, key)
    ) WITHOUT ROWID;
INSERT INTO "counters" VALUES('alice','R#session.create#1740830400000#3c3ad86e',1,1740834060);
CREATE TABLE deliveries (
        id TEXT PRIMARY KEY,
        expires_at INTEGER NOT NULL
    ) WITHOUT ROWID;
INSERT INTO "deliveries" VALUES('delivery-1',3317630406);
CREATE TABLE messages (
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    sk TEXT NOT NULL,
    id TEXT NOT NULL,
    role TEXT NOT NULL,
    body TEXT,
    body_ref TEXT,
    created_at TEXT NOT NULL,
    PRIMARY KEY (session_id, chat_id, sk),
    UNIQUE (user_id, id)
) WITHOUT ROWID;
INSERT INTO "messages" VALUES('alice','s1','c1','M#1740830402000#m1','m1','user','{"id":"m1","role":"user","parts":[{"type":"text","text":"Parse it"}]}',NULL,'2025-03-01T12:00:02+00:00');
INSERT INTO "messages" VALUES('alice','s1','c1','M#1740830403000#m2','m2','assistant','{"id":"m2","role":"assistant","parts":[{"type":"text","text":"Parsed."}]}',NULL,'2025-03-01T12:00:03+00:00');
INSERT INTO "messages" VALUES('alice','s1','c1','M#1740830404000#m3','m3','assistant',NULL,'messages/c1/m3/c65aaf6b7a63d5bf.json','2025-03-01T12:00:04+00:00');
INSERT INTO "messages" VALUES('alice','s1','c1','M#1740830412000#m6','m6','user','{"id":"m6","role":"user","parts":[{"type":"text","text":"More"}]}',NULL,'2025-03-01T12:00:12+00:00');
INSERT INTO "messages" VALUES('alice','s1','c2','M#1740830409000#m4','m4','user','{"id":"m4","role":"user","parts":[{"type":"text","text":"Second chat"}]}',NULL,'2025-03-01T12:00:09+00:00');
INSERT INTO "messages" VALUES('alice','s1','c2','M#1740830410000#m5','m5','assistant','{"id":"m5","role":"assistant","parts":[{"type":"text","text":"Answered"}]}',NULL,'2025-03-01T12:00:10+00:00');
CREATE TABLE outbox (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        entry TEXT NOT NULL
    );
INSERT INTO "outbox" VALUES(1,'s1','alice','{"id":"e1","sessionId":"s1","at":"2025-03-01T12:00:00Z","type":"session.created","detail":{}}');
INSERT INTO "outbox" VALUES(2,'s1','alice','{"id":"e2","sessionId":"s1","at":"2025-03-01T12:00:05Z","type":"session.renamed","detail":{}}');
INSERT INTO "outbox" VALUES(3,'s1','alice','{"id":"e3","sessionId":"s1","at":"2025-03-01T12:00:08Z","type":"test.event","detail":{"n":1}}');
CREATE TABLE profiles (
        user_id TEXT PRIMARY KEY,
        default_model_id TEXT,
        auto_commit_push INTEGER NOT NULL DEFAULT 0,
        auto_create_pr INTEGER NOT NULL DEFAULT 0,
        archived_count INTEGER NOT NULL DEFAULT 0
    );
INSERT INTO "profiles" VALUES('alice','scripted/default',0,0,0);
CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        status TEXT NOT NULL,
        created_key TEXT NOT NULL,
        due_shard TEXT,
        due_at TEXT,
        idle_shard TEXT,
        hibernated_at TEXT,
        pr_key TEXT,
        data TEXT NOT NULL
    );
INSERT INTO "sessions" VALUES('s1','alice','running','2025-03-01T12:00:00+00:00#s1',NULL,NULL,NULL,NULL,NULL,'{"id":"s1","userId":"alice","title":"Fix the parser again","titleSource":"user","status":"running","repoOwner":"acme","repoName":"widgets","cloneUrl":null,"branch":null,"isNewBranch":false,"ownBranch":null,"autoCommitPushOverride":null,"autoCreatePrOverride":null,"askBeforeBash":false,"lifecycleState":"provisioning","lifecycleVersion":0,"lifecycleError":null,"lifecycleErrorCode":null,"lastActivityAt":"2025-03-01T12:00:09Z","hibernateAfter":"2025-03-01T13:00:09Z","sandboxExpiresAt":null,"linesAdded":0,"linesRemoved":0,"prNumber":null,"prStatus":null,"createdAt":"2025-03-01T12:00:00Z","updatedAt":"2025-03-01T12:00:05Z","ownerName":null,"ownerEmail":null,"sandbox":null,"sandboxGeneration":0,"cachedDiffAt":null,"lifecycleRunId":null,"snapshot":null,"turnActiveUntil":null,"hibernatedAt":null,"bundle":null,"archivePending":null,"chats":{"c1":{"createdAt":"2025-03-01T12:00:00+00:00","updatedAt":"2025-03-01T12:00:12+00:00","lastAssistantMessageAt":"2025-03-01T12:00:04+00:00","lastReadAt":"2025-03-01T12:00:07+00:00","streaming":true},"c2":{"createdAt":"2025-03-01T12:00:01+00:00","updatedAt":"2025-03-01T12:00:10+00:00","lastAssistantMessageAt":"2025-03-01T12:00:10+00:00"}}}');
CREATE TABLE shares (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    UNIQUE (session_id, chat_id)
);
INSERT INTO "shares" VALUES('share-1','s1','c1');
CREATE TABLE titles (
        user_id TEXT NOT NULL,
        title TEXT NOT NULL,
        session_id TEXT NOT NULL,
        PRIMARY KEY (user_id, title, session_id)
    ) WITHOUT ROWID;
INSERT INTO "titles" VALUES('alice','Fix the parser again','s1');
CREATE INDEX sessions_by_user ON sessions (user_id, created_key);
CREATE INDEX sessions_by_user_status ON sessions (user_id, status, created_key);
CREATE INDEX sessions_overdue ON sessions (due_at)
        WHERE due_shard IS NOT NULL AND due_at IS NOT NULL;
CREATE INDEX sessions_idle ON sessions (hibernated_at)
        WHERE idle_shard IS NOT NULL AND hibernated_at IS NOT NULL;
CREATE INDEX sessions_by_pr ON sessions (pr_key) WHERE pr_key IS NOT NULL;
CREATE INDEX agent_runs_session ON agent_runs (session_id, started_key);
CREATE INDEX agent_runs_by_chat
        ON agent_runs (session_id, chat_id, started_key);
CREATE INDEX agent_runs_status ON agent_runs (status);
CREATE INDEX agent_run_events_expiry ON agent_run_events (expires_at);
DELETE FROM "sqlite_sequence";
INSERT INTO "sqlite_sequence" VALUES('outbox',3);
COMMIT;
PRAGMA user_version = 5;
