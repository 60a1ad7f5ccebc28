-- rocpd schema 4.1.0 (versions/4.1.0 of rocprofiler-sdk-rocpd): host and device records sit on a
-- `rocpd_track` (node, process, thread, agent, queue, stream) instead of carrying nid/pid/tid/agent/
-- queue columns themselves; event categories move to `rocpd_info_category`; the `kernels` view names
-- the agent `agent_absolute_index`/`agent_logical_index`/`agent_type_index` (3.0.x: `agent_abs_index`,
-- `agent_log_index`) and takes the queue from the track. Dispatches and regions keep their own
-- `start`/`end`.
-- Taken from https://github.com/ROCm/rocm-systems, projects/rocprofiler-sdk/source/share/rocprofiler-sdk-rocpd/:
--   versions/4.1.0/rocpd_tables.sql at commit a195360b2bc586c323dca505f716e2fb7ab7909a (CREATE TABLE,
--     verbatim, for the tables below),
--   versions/4.1.0/data_views.sql at commit b9871a311548f69592106f4f36896fc2a08c2517 (`tracks`,
--     `events`, `regions`, `kernels`, verbatim).
-- NOT verbatim: versions/4.1.0/rocpd_views.sql (installed beside them, per versions/4.1.0/CMakeLists.txt
-- at a195360b) is not in the reference index; the `rocpd_*` views below over the `{{uuid}}` tables are
-- written in the form of 3.0.0's rocpd_views.sql (`SELECT * FROM rocpd_<table>{{uuid}}`), and the
-- schema_version INSERT of 3.0.x's rocpd_tables.sql is left out (4.1.0's rocpd_tables.sql has none;
-- its rocpd_metadata.sql is not in the index either).
-- Left out (not read by pytest-aaco): rocpd_info_pmc, rocpd_info_address_range, rocpd_info_source_code,
-- rocpd_info_pc, rocpd_arg, rocpd_line_info, rocpd_call_stack, rocpd_pmc_event, rocpd_sample,
-- rocpd_memory_copy, rocpd_memory_allocate, their views, the other data views, indexes and summaries.

CREATE TABLE IF NOT EXISTS
    "rocpd_metadata{{uuid}}" (
        "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
        "tag" TEXT NOT NULL,
        "value" TEXT NOT NULL
    );

CREATE TABLE IF NOT EXISTS
    `rocpd_string{{uuid}}` (
        "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
        "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
        "string" TEXT NOT NULL UNIQUE ON CONFLICT ABORT
    );

CREATE TABLE IF NOT EXISTS
    `rocpd_info_node{{uuid}}` (
        "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
        "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
        "hash" BIGINT NOT NULL UNIQUE,
        "machine_id" TEXT NOT NULL UNIQUE,
        "name" TEXT, -- optional user provided name
        "system_name" TEXT,
        "hostname" TEXT,
        "release" TEXT,
        "version" TEXT,
        "hardware_name" TEXT,
        "domain_name" TEXT
    );

CREATE TABLE IF NOT EXISTS
    `rocpd_info_process{{uuid}}` (
        "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
        "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
        "nid" INTEGER NOT NULL,
        "ppid" INTEGER,
        "pid" INTEGER NOT NULL,
        "name" TEXT, -- optional user provided name
        "init" BIGINT,
        "fini" BIGINT,
        "start" BIGINT,
        "end" BIGINT,
        "command" TEXT,
        "environment" JSONB DEFAULT "{}" NOT NULL,
        "extdata" JSONB DEFAULT "{}" NOT NULL,
        FOREIGN KEY (nid) REFERENCES `rocpd_info_node{{uuid}}` (id) ON UPDATE CASCADE
    );

CREATE TABLE IF NOT EXISTS
    `rocpd_info_thread{{uuid}}` (
        "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
        "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
        "nid" INTEGER NOT NULL,
        "ppid" INTEGER,
        "pid" INTEGER NOT NULL,
        "tid" INTEGER NOT NULL,
        "name" TEXT, -- optional user provided name
        "start" BIGINT,
        "end" BIGINT,
        "extdata" JSONB DEFAULT "{}" NOT NULL,
        FOREIGN KEY (nid) REFERENCES `rocpd_info_node{{uuid}}` (id) ON UPDATE CASCADE,
        FOREIGN KEY (pid) REFERENCES `rocpd_info_process{{uuid}}` (id) ON UPDATE CASCADE
    );

-- Stores all the categories for filtering
CREATE TABLE IF NOT EXISTS
    `rocpd_info_category{{uuid}}` (
        "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
        "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
        "name" TEXT NOT NULL,
        "extdata" JSONB DEFAULT "{}" NOT NULL
    );

CREATE TABLE IF NOT EXISTS
    `rocpd_info_agent{{uuid}}` (
        "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
        "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
        "nid" INTEGER NOT NULL,
        "pid" INTEGER NOT NULL,
        "type" TEXT CHECK ("type" IN ('CPU', 'GPU')),
        "absolute_index" INTEGER,
        "logical_index" INTEGER,
        "type_index" INTEGER,
        "uuid" INTEGER,
        "name" TEXT, -- optional user provided name
        "generic_name" TEXT,
        "model_name" TEXT,
        "vendor_name" TEXT,
        "product_name" TEXT,
        "extdata" JSONB DEFAULT "{}" NOT NULL,
        FOREIGN KEY (nid) REFERENCES `rocpd_info_node{{uuid}}` (id) ON UPDATE CASCADE,
        FOREIGN KEY (pid) REFERENCES `rocpd_info_process{{uuid}}` (id) ON UPDATE CASCADE
    );

CREATE TABLE IF NOT EXISTS
    `rocpd_info_queue{{uuid}}` (
        "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
        "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
        "nid" INTEGER NOT NULL,
        "pid" INTEGER NOT NULL,
        "name" TEXT, -- optional user provided name
        "extdata" JSONB DEFAULT "{}" NOT NULL,
        FOREIGN KEY (nid) REFERENCES `rocpd_info_node{{uuid}}` (id) ON UPDATE CASCADE,
        FOREIGN KEY (pid) REFERENCES `rocpd_info_process{{uuid}}` (id) ON UPDATE CASCADE
    );

CREATE TABLE IF NOT EXISTS
    `rocpd_info_stream{{uuid}}` (
        "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
        "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
        "nid" INTEGER NOT NULL,
        "pid" INTEGER NOT NULL,
        "name" TEXT, -- optional user provided name
        "extdata" JSONB DEFAULT "{}" NOT NULL,
        FOREIGN KEY (nid) REFERENCES `rocpd_info_node{{uuid}}` (id) ON UPDATE CASCADE,
        FOREIGN KEY (pid) REFERENCES `rocpd_info_process{{uuid}}` (id) ON UPDATE CASCADE
    );

CREATE TABLE IF NOT EXISTS
    `rocpd_info_code_object{{uuid}}` (
        "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
        "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
        "nid" INTEGER NOT NULL,
        "pid" INTEGER NOT NULL,
        "agent_id" INTEGER,
        "uri" TEXT,
        "load_base" BIGINT,
        "load_size" BIGINT,
        "load_delta" BIGINT,
        "storage_type" TEXT CHECK ("storage_type" IN ('FILE', 'MEMORY')),
        "extdata" JSONB DEFAULT "{}" NOT NULL,
        FOREIGN KEY (nid) REFERENCES `rocpd_info_node{{uuid}}` (id) ON UPDATE CASCADE,
        FOREIGN KEY (pid) REFERENCES `rocpd_info_process{{uuid}}` (id) ON UPDATE CASCADE,
        FOREIGN KEY (agent_id) REFERENCES `rocpd_info_agent{{uuid}}` (id) ON UPDATE CASCADE
    );

CREATE TABLE IF NOT EXISTS
    `rocpd_info_kernel_symbol{{uuid}}` (
        "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
        "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
        "nid" INTEGER NOT NULL,
        "pid" INTEGER NOT NULL,
        "code_object_id" INTEGER NOT NULL,
        "kernel_name" TEXT,
        "display_name" TEXT,
        "kernel_object" INTEGER,
        "kernarg_segment_size" INTEGER,
        "kernarg_segment_alignment" INTEGER,
        "group_segment_size" INTEGER,
        "private_segment_size" INTEGER,
        "sgpr_count" INTEGER,
        "arch_vgpr_count" INTEGER,
        "accum_vgpr_count" INTEGER,
        "extdata" JSONB DEFAULT "{}" NOT NULL,
        FOREIGN KEY (nid) REFERENCES `rocpd_info_node{{uuid}}` (id) ON UPDATE CASCADE,
        FOREIGN KEY (pid) REFERENCES `rocpd_info_process{{uuid}}` (id) ON UPDATE CASCADE,
        FOREIGN KEY (code_object_id) REFERENCES `rocpd_info_code_object{{uuid}}` (id) ON UPDATE CASCADE
    );

-- Stores repetitive info for samples
CREATE TABLE IF NOT EXISTS
    `rocpd_track{{uuid}}` (
        "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
        "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
        "nid" INTEGER NOT NULL,
        "ppid" INTEGER,
        "pid" INTEGER,
        "tid" INTEGER,
        "agent_id" INTEGER,
        "queue_id" INTEGER,
        "stream_id" INTEGER,
        "name_id" INTEGER,
        "extdata" JSONB DEFAULT "{}" NOT NULL,
        FOREIGN KEY (nid) REFERENCES `rocpd_info_node{{uuid}}` (id) ON UPDATE CASCADE,
        FOREIGN KEY (pid) REFERENCES `rocpd_info_process{{uuid}}` (id) ON UPDATE CASCADE,
        FOREIGN KEY (tid) REFERENCES `rocpd_info_thread{{uuid}}` (id) ON UPDATE CASCADE,
        FOREIGN KEY (agent_id) REFERENCES `rocpd_info_agent{{uuid}}` (id) ON UPDATE CASCADE,
        FOREIGN KEY (queue_id) REFERENCES `rocpd_info_queue{{uuid}}` (id) ON UPDATE CASCADE,
        FOREIGN KEY (stream_id) REFERENCES `rocpd_info_stream{{uuid}}` (id) ON UPDATE CASCADE,
        FOREIGN KEY (name_id) REFERENCES `rocpd_string{{uuid}}` (id) ON UPDATE CASCADE
    );

-- Storage for a region, instant, and counter
CREATE TABLE IF NOT EXISTS
    `rocpd_event{{uuid}}` (
        "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
        "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
        "category_id" INTEGER,
        "stack_id" INTEGER,
        "parent_stack_id" INTEGER,
        "correlation_id" INTEGER,
        "extdata" JSONB DEFAULT "{}" NOT NULL,
        FOREIGN KEY (category_id) REFERENCES `rocpd_info_category{{uuid}}` (id) ON UPDATE CASCADE
    );

-- Region with a start/stop on the same thread (CPU)
CREATE TABLE IF NOT EXISTS
    `rocpd_region{{uuid}}` (
        "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
        "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
        "track_id" INTEGER NOT NULL,
        "name_id" INTEGER NOT NULL,
        "start" BIGINT NOT NULL,
        "end" BIGINT NOT NULL,
        "event_id" INTEGER,
        "extdata" JSONB DEFAULT "{}" NOT NULL,
        FOREIGN KEY (track_id) REFERENCES `rocpd_track{{uuid}}` (id) ON UPDATE CASCADE,
        FOREIGN KEY (name_id) REFERENCES `rocpd_string{{uuid}}` (id) ON UPDATE CASCADE,
        FOREIGN KEY (event_id) REFERENCES `rocpd_event{{uuid}}` (id) ON UPDATE CASCADE
    );

CREATE TABLE IF NOT EXISTS
    `rocpd_kernel_dispatch{{uuid}}` (
        "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
        "guid" TEXT DEFAULT "{{guid}}" NOT NULL,
        "track_id" INTEGER NOT NULL,
        "kernel_id" INTEGER NOT NULL,
        "dispatch_id" INTEGER NOT NULL,
        "start" BIGINT NOT NULL,
        "end" BIGINT NOT NULL,
        "private_segment_size" INTEGER,
        "group_segment_size" INTEGER,
        "workgroup_size_x" INTEGER NOT NULL,
        "workgroup_size_y" INTEGER NOT NULL,
        "workgroup_size_z" INTEGER NOT NULL,
        "grid_size_x" INTEGER NOT NULL,
        "grid_size_y" INTEGER NOT NULL,
        "grid_size_z" INTEGER NOT NULL,
        "region_name_id" INTEGER,
        "event_id" INTEGER,
        "extdata" JSONB DEFAULT "{}" NOT NULL,
        FOREIGN KEY (track_id) REFERENCES `rocpd_track{{uuid}}` (id) ON UPDATE CASCADE,
        FOREIGN KEY (kernel_id) REFERENCES `rocpd_info_kernel_symbol{{uuid}}` (id) ON UPDATE CASCADE,
        FOREIGN KEY (region_name_id) REFERENCES `rocpd_string{{uuid}}` (id) ON UPDATE CASCADE,
        FOREIGN KEY (event_id) REFERENCES `rocpd_event{{uuid}}` (id) ON UPDATE CASCADE
    );

-- `rocpd_*` views over the tables: the form of 3.0.0's rocpd_views.sql (see the header)

CREATE VIEW IF NOT EXISTS
    `rocpd_metadata` AS
SELECT
    *
FROM
    `rocpd_metadata{{uuid}}`;

CREATE VIEW IF NOT EXISTS
    `rocpd_string` AS
SELECT
    *
FROM
    `rocpd_string{{uuid}}`;

CREATE VIEW IF NOT EXISTS
    `rocpd_info_node` AS
SELECT
    *
FROM
    `rocpd_info_node{{uuid}}`;

CREATE VIEW IF NOT EXISTS
    `rocpd_info_process` AS
SELECT
    *
FROM
    `rocpd_info_process{{uuid}}`;

CREATE VIEW IF NOT EXISTS
    `rocpd_info_thread` AS
SELECT
    *
FROM
    `rocpd_info_thread{{uuid}}`;

CREATE VIEW IF NOT EXISTS
    `rocpd_info_category` AS
SELECT
    *
FROM
    `rocpd_info_category{{uuid}}`;

CREATE VIEW IF NOT EXISTS
    `rocpd_info_agent` AS
SELECT
    *
FROM
    `rocpd_info_agent{{uuid}}`;

CREATE VIEW IF NOT EXISTS
    `rocpd_info_queue` AS
SELECT
    *
FROM
    `rocpd_info_queue{{uuid}}`;

CREATE VIEW IF NOT EXISTS
    `rocpd_info_stream` AS
SELECT
    *
FROM
    `rocpd_info_stream{{uuid}}`;

CREATE VIEW IF NOT EXISTS
    `rocpd_info_code_object` AS
SELECT
    *
FROM
    `rocpd_info_code_object{{uuid}}`;

CREATE VIEW IF NOT EXISTS
    `rocpd_info_kernel_symbol` AS
SELECT
    *
FROM
    `rocpd_info_kernel_symbol{{uuid}}`;

CREATE VIEW IF NOT EXISTS
    `rocpd_track` AS
SELECT
    *
FROM
    `rocpd_track{{uuid}}`;

CREATE VIEW IF NOT EXISTS
    `rocpd_event` AS
SELECT
    *
FROM
    `rocpd_event{{uuid}}`;

CREATE VIEW IF NOT EXISTS
    `rocpd_region` AS
SELECT
    *
FROM
    `rocpd_region{{uuid}}`;

CREATE VIEW IF NOT EXISTS
    `rocpd_kernel_dispatch` AS
SELECT
    *
FROM
    `rocpd_kernel_dispatch{{uuid}}`;

-- data_views.sql (versions/4.1.0 at b9871a31): tracks, events, regions, kernels
--
-- Useful views
--
-- This is a view of all the joined track information
CREATE VIEW IF NOT EXISTS
    `tracks` AS
SELECT
    T.id,
    T.guid,
    T.name_id AS track_name_id,
    ST.string AS track_name,
    T.nid,
    N.name AS node_name,
    N.hash AS node_hash,
    N.machine_id AS node_machine_id,
    N.system_name AS node_system_name,
    N.hostname AS node_hostname,
    N.release AS node_release,
    N.version AS node_version,
    N.hardware_name AS node_hardware_version,
    T.pid,
    P.name AS process_name,
    P.ppid,
    P.init AS process_init,
    P.fini AS process_fini,
    P.start AS process_start,
    P.end AS process_end,
    P.command AS process_command,
    T.tid,
    TH.name AS thread_name,
    TH.start AS thread_start,
    TH.end AS thread_end,
    T.agent_id,
    A.name AS agent_name,
    A.type AS agent_type,
    A.absolute_index AS agent_absolute_index,
    A.logical_index AS agent_logical_index,
    A.type_index AS agent_type_index,
    A.uuid AS agent_uuid,
    A.generic_name AS agent_generic_name,
    A.model_name AS agent_model_name,
    A.vendor_name AS agent_vendor_name,
    A.product_name AS agent_product_name,
    T.queue_id,
    Q.name AS queue_name,
    T.stream_id,
    S.name AS stream_name
FROM
    `rocpd_track` T
    LEFT JOIN `rocpd_info_node` N ON N.id = T.nid
    AND N.guid = T.guid
    LEFT JOIN `rocpd_info_process` P ON P.pid = T.pid
    AND P.guid = T.guid
    LEFT JOIN `rocpd_info_thread` TH ON TH.tid = T.tid
    AND TH.guid = T.guid
    LEFT JOIN `rocpd_info_agent` A ON A.id = T.agent_id
    AND A.guid = T.guid
    LEFT JOIN `rocpd_info_queue` Q ON Q.id = T.queue_id
    AND Q.guid = T.guid
    LEFT JOIN `rocpd_info_stream` S ON S.id = T.stream_id
    AND S.guid = T.guid
    LEFT JOIN `rocpd_string` ST ON ST.id = T.name_id
    AND ST.guid = T.guid;

--
-- This is a view of all the joined event information
CREATE VIEW IF NOT EXISTS
    `events` AS
SELECT
    E.id,
    E.guid,
    E.category_id,
    (
        SELECT
            name
        FROM
            `rocpd_info_category` C
        WHERE
            C.id = E.category_id
            AND C.guid = E.guid
    ) AS category,
    E.stack_id,
    E.parent_stack_id,
    E.correlation_id,
    E.extdata
FROM
    `rocpd_event` E;

-- CPU regions
CREATE VIEW IF NOT EXISTS
    `regions` AS
SELECT
    R.id,
    R.guid,
    E.category,
    NS.string AS name,
    T.nid,
    T.pid,
    T.tid,
    R.start AS `start`,
    R.end AS `end`,
    (R.end - R.start) AS `duration`,
    R.event_id,
    R.track_id,
    E.stack_id,
    E.parent_stack_id,
    E.correlation_id,
    E.extdata
FROM
    `rocpd_region` R
    INNER JOIN `events` E ON E.id = R.event_id
    AND E.guid = R.guid
    INNER JOIN `tracks` T ON T.id = R.track_id
    AND T.guid = R.guid
    INNER JOIN `rocpd_string` NS ON NS.id = R.name_id
    AND NS.guid = R.guid;

--
-- Kernel information
CREATE VIEW
    `kernels` AS
SELECT
    K.id,
    K.guid,
    T.nid,
    T.pid,
    T.tid,
    E.category,
    R.string AS region,
    S.display_name AS name,
    T.agent_id,
    T.agent_absolute_index,
    T.agent_logical_index,
    T.agent_type_index,
    T.agent_type,
    S.code_object_id,
    K.kernel_id,
    K.dispatch_id,
    T.queue_id,
    T.queue_name AS `queue`,
    T.stream_id,
    T.stream_name AS `stream`,
    K.start AS `start`,
    K.end AS `end`,
    (K.end - K.start) AS `duration`,
    K.event_id,
    K.track_id,
    -- OpenCL uses "grid" to mean number of work-items in a dimension
    K.grid_size_x AS grid_x,
    K.grid_size_y AS grid_y,
    K.grid_size_z AS grid_z,
    (K.grid_size_x * K.grid_size_y * K.grid_size_z) AS ocl_grid_size,
    -- OpenCL uses "work-group" to mean a group of work-items that execute together
    K.workgroup_size_x AS workgroup_x,
    K.workgroup_size_y AS workgroup_y,
    K.workgroup_size_z AS workgroup_z,
    (K.workgroup_size_x * K.workgroup_size_y * K.workgroup_size_z) AS ocl_workgroup_size,
    -- HIP uses "block" to mean number of threads in a workgroup
    K.workgroup_size_x AS block_size_x,
    K.workgroup_size_y AS block_size_y,
    K.workgroup_size_z AS block_size_z,
    (K.workgroup_size_x * K.workgroup_size_y * K.workgroup_size_z) AS block_size,
    -- HIP uses "grid" to mean number of blocks in a grid
    (K.grid_size_x / K.workgroup_size_x) AS grid_size_x,
    (K.grid_size_y / K.workgroup_size_y) AS grid_size_y,
    (K.grid_size_z / K.workgroup_size_z) AS grid_size_z,
    (K.grid_size_x / K.workgroup_size_x) * (K.grid_size_y / K.workgroup_size_y) * (K.grid_size_z / K.workgroup_size_z) AS grid_size,
    -- lds_block_size is the group segment size aligned to 512 bytes
    ((K.group_segment_size + 511) / 512) * 512 AS lds_block_size,
    K.private_segment_size AS scratch_size,
    S.group_segment_size AS static_lds_block_size,
    S.private_segment_size AS static_scratch_size,
    S.sgpr_count,
    S.arch_vgpr_count,
    S.accum_vgpr_count,
    E.stack_id,
    E.parent_stack_id,
    E.correlation_id,
    E.extdata
FROM
    `rocpd_kernel_dispatch` K
    INNER JOIN `tracks` T ON T.id = K.track_id
    AND T.guid = K.guid
    INNER JOIN `events` E ON E.id = K.event_id
    AND E.guid = K.guid
    INNER JOIN `rocpd_string` R ON R.id = K.region_name_id
    AND R.guid = K.guid
    INNER JOIN `rocpd_info_kernel_symbol` S ON S.id = K.kernel_id
    AND S.guid = K.guid;
