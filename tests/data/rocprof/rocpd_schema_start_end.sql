-- The rocpd tables pytest-aaco reads, as rocprofv3 creates them (schema_version 3), with the
-- per-process {{uuid}} suffix of the table names left out and the views the rocpd files carry.
-- Columns as in ROCm/rocprofiler-sdk source/share/rocprofiler-sdk-rocpd/rocpd_tables.sql at commit
-- 50c89cb (kernel dispatches and regions with their own "start"/"end", ns) and the "kernels" and
-- "regions" views of data_views.sql (reduced to the columns read and the joins they need).
CREATE TABLE IF NOT EXISTS "rocpd_metadata" ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "tag" TEXT NOT NULL, "value" TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS "rocpd_string" ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "guid" TEXT DEFAULT "g" NOT NULL, "string" TEXT NOT NULL UNIQUE ON CONFLICT ABORT);
CREATE TABLE IF NOT EXISTS "rocpd_info_kernel_symbol" ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "guid" TEXT DEFAULT "g" NOT NULL, "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL,
    "code_object_id" INTEGER NOT NULL, "kernel_name" TEXT, "display_name" TEXT, "kernel_object" INTEGER,
    "extdata" JSONB DEFAULT "{}" NOT NULL);
CREATE TABLE IF NOT EXISTS "rocpd_region" ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "guid" TEXT DEFAULT "g" NOT NULL, "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "tid" INTEGER NOT NULL,
    "start" BIGINT NOT NULL, "end" BIGINT NOT NULL, "name_id" INTEGER NOT NULL, "event_id" INTEGER,
    "extdata" JSONB DEFAULT "{}" NOT NULL);
CREATE TABLE IF NOT EXISTS "rocpd_kernel_dispatch" ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "guid" TEXT DEFAULT "g" NOT NULL, "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL, "tid" INTEGER,
    "agent_id" INTEGER NOT NULL, "kernel_id" INTEGER NOT NULL, "dispatch_id" INTEGER NOT NULL,
    "queue_id" INTEGER NOT NULL, "stream_id" INTEGER NOT NULL, "start" BIGINT NOT NULL, "end" BIGINT NOT NULL,
    "private_segment_size" INTEGER, "group_segment_size" INTEGER,
    "workgroup_size_x" INTEGER NOT NULL, "workgroup_size_y" INTEGER NOT NULL, "workgroup_size_z" INTEGER NOT NULL,
    "grid_size_x" INTEGER NOT NULL, "grid_size_y" INTEGER NOT NULL, "grid_size_z" INTEGER NOT NULL,
    "region_name_id" INTEGER, "event_id" INTEGER, "extdata" JSONB DEFAULT "{}" NOT NULL);
INSERT INTO "rocpd_metadata" ("tag", "value") VALUES ("schema_version", "3");
CREATE VIEW IF NOT EXISTS "kernels" AS
SELECT K.id, K.guid, K.nid, K.pid, K.tid, S.display_name AS name, K.agent_id, K.kernel_id, K.dispatch_id,
    K.queue_id, K.stream_id, K.start AS "start", K.end AS "end", (K.end - K.start) AS "duration"
FROM "rocpd_kernel_dispatch" K INNER JOIN "rocpd_info_kernel_symbol" S ON S.id = K.kernel_id AND S.guid = K.guid;
CREATE VIEW IF NOT EXISTS "regions" AS
SELECT R.id, R.guid, NS.string AS name, R.nid, R.pid, R.tid, R.start AS "start", R.end AS "end",
    (R.end - R.start) AS "duration", R.event_id
FROM "rocpd_region" R INNER JOIN "rocpd_string" NS ON NS.id = R.name_id AND NS.guid = R.guid;
