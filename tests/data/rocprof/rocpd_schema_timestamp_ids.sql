-- The rocpd tables pytest-aaco reads in their later layout (also schema_version 3): dispatches and
-- regions point into rocpd_timestamp by start_id/end_id, and the agent and queue sit on a track.
-- Columns as in ROCm/rocprofiler-sdk source/share/rocprofiler-sdk-rocpd/rocpd_tables.sql at commit
-- 19d33bb, with the {{uuid}} suffix left out. No views: the reader falls back to the tables.
CREATE TABLE IF NOT EXISTS "rocpd_metadata" ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "tag" TEXT NOT NULL, "value" TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS "rocpd_string" ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "guid" TEXT DEFAULT "g" NOT NULL, "string" TEXT NOT NULL UNIQUE ON CONFLICT ABORT);
CREATE TABLE IF NOT EXISTS "rocpd_info_kernel_symbol" ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "guid" TEXT DEFAULT "g" NOT NULL, "nid" INTEGER NOT NULL, "pid" INTEGER NOT NULL,
    "code_object_id" INTEGER NOT NULL, "kernel_name" TEXT, "display_name" TEXT, "kernel_object" INTEGER,
    "extdata" JSONB DEFAULT "{}" NOT NULL);
CREATE TABLE IF NOT EXISTS "rocpd_track" ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "guid" TEXT DEFAULT "g" NOT NULL, "nid" INTEGER NOT NULL, "ppid" INTEGER, "pid" INTEGER, "tid" INTEGER,
    "agent_id" INTEGER, "queue_id" INTEGER, "stream_id" INTEGER, "name_id" INTEGER,
    "extdata" JSONB DEFAULT "{}" NOT NULL);
CREATE TABLE IF NOT EXISTS "rocpd_timestamp" ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "guid" TEXT DEFAULT "g" NOT NULL, "value" BIGINT NOT NULL, "phase" INTEGER CHECK ("phase" IN (0, 1, 2)),
    "track_id" INTEGER);
CREATE TABLE IF NOT EXISTS "rocpd_region" ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "guid" TEXT DEFAULT "g" NOT NULL, "track_id" INTEGER NOT NULL, "name_id" INTEGER NOT NULL,
    "start_id" INTEGER NOT NULL, "end_id" INTEGER NOT NULL, "event_id" INTEGER,
    "extdata" JSONB DEFAULT "{}" NOT NULL);
CREATE TABLE IF NOT EXISTS "rocpd_kernel_dispatch" ("id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "guid" TEXT DEFAULT "g" NOT NULL, "track_id" INTEGER NOT NULL, "kernel_id" INTEGER NOT NULL,
    "dispatch_id" INTEGER NOT NULL, "start_id" INTEGER NOT NULL, "end_id" INTEGER NOT NULL,
    "private_segment_size" INTEGER, "group_segment_size" INTEGER,
    "workgroup_size_x" INTEGER NOT NULL, "workgroup_size_y" INTEGER NOT NULL, "workgroup_size_z" INTEGER NOT NULL,
    "grid_size_x" INTEGER NOT NULL, "grid_size_y" INTEGER NOT NULL, "grid_size_z" INTEGER NOT NULL,
    "region_name_id" INTEGER, "event_id" INTEGER, "extdata" JSONB DEFAULT "{}" NOT NULL);
INSERT INTO "rocpd_metadata" ("tag", "value") VALUES ("schema_version", "3");
