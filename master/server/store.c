/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * store.c - opening the master's database, its schema, transactions,
 * statements, the consistency check and MS_INFO (see store.h).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "common/log.h"
#include "master/server/store-int.h"

#define CHECKPOINT_FRAMES 1000	    /* log pages between checkpoints */
#define DB_CHUNK_BYTES	  (8 << 20) /* growth step of the database file */

/*
 * Schema version 1, as first created; migrations[] below brings it to
 * MASTER_SCHEMA_VERSION.  A new database is made the same way (version 1,
 * then every migration), so a new and an upgraded database never differ.
 *
 * The extents of a server are the implicit array idx = 0 .. nr_extents-1
 * (extent idx starts at byte idx * E of the LUN).  An extent's allocation
 * lock is its row in allocations, which also records the disk and the
 * place in the disk (column, extent, replica) it serves; UNIQUE (server_id,
 * idx) makes a second owner impossible.  Extents at or above next_fresh
 * were never handed out; those below it that are free again are listed in
 * released.  Allocation therefore inserts one row per replica and touches
 * two B-trees; registration inserts one row, whatever the LUN's size.
 *
 * The constraints are the last line of defence: the code never breaks
 * them, and master_store_check verifies what they cannot express.
 */
static const char schema_sql[] =
	"CREATE TABLE meta ("
	" id INTEGER PRIMARY KEY CHECK (id = 1),"
	" schema_version INTEGER NOT NULL,"
	" extent_size_bytes INTEGER NOT NULL CHECK (extent_size_bytes > 0));"
	"CREATE TABLE servers ("
	" id INTEGER PRIMARY KEY AUTOINCREMENT," /* ids are never reused */
	" address TEXT NOT NULL CHECK (length(address) BETWEEN 1 AND 63),"
	" portal TEXT NOT NULL CHECK (length(portal) BETWEEN 1 AND 261),"
	" target TEXT NOT NULL CHECK (length(target) BETWEEN 1 AND 223),"
	" lun INTEGER NOT NULL CHECK (lun BETWEEN 0 AND 65535),"
	" size_bytes INTEGER NOT NULL CHECK (size_bytes > 0),"
	" block_size INTEGER NOT NULL CHECK (block_size IN (512, 1024, 2048,"
	"  4096)),"
	" nr_extents INTEGER NOT NULL CHECK (nr_extents > 0),"
	" free_extents INTEGER NOT NULL"
	"  CHECK (free_extents BETWEEN 0 AND nr_extents),"
	" next_fresh INTEGER NOT NULL DEFAULT 0"
	"  CHECK (next_fresh BETWEEN 0 AND nr_extents),"
	" draining INTEGER NOT NULL DEFAULT 0 CHECK (draining IN (0, 1)),"
	" UNIQUE (target, lun));"
	"CREATE TABLE vdisks ("
	" id TEXT PRIMARY KEY NOT NULL CHECK (length(id) BETWEEN 1 AND 63),"
	" columns INTEGER NOT NULL CHECK (columns BETWEEN 1 AND 256),"
	" extents_per_column INTEGER NOT NULL CHECK (extents_per_column >= 1),"
	" replicas INTEGER NOT NULL CHECK (replicas BETWEEN 1 AND 4),"
	" CHECK (columns * extents_per_column * replicas <= 262144)"
	") WITHOUT ROWID;"
	"CREATE TABLE allocations ("
	" vdisk_id TEXT NOT NULL REFERENCES vdisks (id),"
	" col INTEGER NOT NULL CHECK (col >= 0),"
	" ext INTEGER NOT NULL CHECK (ext >= 0),"
	" replica INTEGER NOT NULL CHECK (replica >= 0),"
	" server_id INTEGER NOT NULL REFERENCES servers (id),"
	" idx INTEGER NOT NULL CHECK (idx >= 0),"
	" PRIMARY KEY (vdisk_id, col, ext, replica),"
	" UNIQUE (server_id, idx)" /* one owner per extent */
	") WITHOUT ROWID;"
	"CREATE TABLE released ("
	" server_id INTEGER NOT NULL REFERENCES servers (id),"
	" idx INTEGER NOT NULL CHECK (idx >= 0),"
	" PRIMARY KEY (server_id, idx)"
	") WITHOUT ROWID;";

/*
 * migrations[v] turns schema v into v + 1, inside the transaction that
 * opens the database (all of it or none is applied).
 *
 * 1 -> 2: a replica's state (issue #6).  allocations.stale is 1 when the
 * replica missed writes (MS_REPLICA_STATE); the partial index holds only
 * those rows, so counting a disk's stale replicas costs nothing while
 * none are.
 *
 * 2 -> 3: a lease per disk (issue #18, store-lease.c).  No foreign key to
 * vdisks: the row outlives a destroyed disk, so that a disk made again
 * under the same name goes on from the epoch its lease had (an epoch
 * never goes back for a name).  Destroying a disk frees its lease.
 *
 * 3 -> 4: fencing (issue #18).  leases.fence_pending is 1 from a fenced
 * takeover until its holder confirms the old holder preempted on every
 * LUN (MS_LEASE_FENCED); a free lease has none pending.  fenced_hosts
 * holds one row per fenced host (the last fence: by whom, which disk at
 * which epoch, when) until MS_HOST_READMIT; its vdisk_id has no foreign
 * key either, a fence outlives the disk.  "by" is an SQL keyword, hence
 * by_host.
 *
 * 4 -> 5: failure domains (issue #19).  servers.host, .rack and .site are
 * the server's labels: host starts as the address (':' and '%' of an IPv6
 * address become '-', the label rule being [A-Za-z0-9._-]), rack and site
 * as '' (unknown).  The CHECKs bound only the length: an empty host label
 * or a bad character is for master_store_check to find, ALTER TABLE
 * cannot add a column whose CHECK its default breaks.  spread_notes holds
 * one row per extent whose replicas were placed below the widest failure
 * domain the labels offered (ms_spread_note): reached < wanted, both
 * levels of ms_domain.
 *
 * 5 -> 6: re-homing and lost servers (issue #19).  servers.failed is 1
 * once MS_SERVER_FAIL marked the server gone for good: placement gives it
 * nothing, its replicas count as lost.  moves holds one row per replica
 * slot being re-homed (store-move.c): the slot's replica is still
 * (old_server, old_idx) in allocations; (new_server, new_idx) is locked
 * by the move alone (UNIQUE: one move per new extent; master_store_check
 * verifies that no allocation or released row names it too), counted out
 * of the new server's free_extents and below its next_fresh like an
 * allocated extent.  reached, wanted and room are the extent's spread
 * with the new replica (placement.h), its spread note at commit.
 *
 * 6 -> 7: CHAP (issue #20).  servers.chap_user and .chap_secret are the
 * server's CHAP account ('' and '': none; both or neither), set by
 * MS_SERVER_CHAP_SET, read only by MS_SERVER_CHAP_GET (STORE_SERVER_COLS
 * leaves them out, so no other reply can carry them).
 *
 * 7 -> 8: snapshots (issue #21).  vdisks.source is the disk a snapshot
 * was taken of ('' for other disks), vdisks.complete 0 while its copy
 * runs (MS_VDISK_SNAPSHOT), 1 after MS_VDISK_SNAPSHOT_DONE and for every
 * other disk.
 */
static const char *const migrations[MASTER_SCHEMA_VERSION] = {
	[1] = "ALTER TABLE allocations ADD COLUMN"
	      " stale INTEGER NOT NULL DEFAULT 0 CHECK (stale IN (0, 1));"
	      "CREATE INDEX allocations_stale ON allocations (vdisk_id)"
	      " WHERE stale = 1;",
	[2] = "CREATE TABLE leases ("
	      " vdisk_id TEXT PRIMARY KEY NOT NULL"
	      "  CHECK (length(vdisk_id) BETWEEN 1 AND 63),"
	      " holder TEXT NOT NULL CHECK (length(holder) <= 63),"
	      " epoch INTEGER NOT NULL CHECK (epoch >= 0),"
	      " previous TEXT NOT NULL CHECK (length(previous) <= 63),"
	      " fence INTEGER NOT NULL CHECK (fence IN (0, 1)),"
	      " since INTEGER NOT NULL CHECK (since >= 0),"
	      " CHECK (holder = '' OR epoch >= 1)"
	      ") WITHOUT ROWID;",
	[3] = "ALTER TABLE leases ADD COLUMN fence_pending INTEGER NOT NULL"
	      " DEFAULT 0 CHECK (fence_pending IN (0, 1));"
	      "CREATE TABLE fenced_hosts ("
	      " host TEXT PRIMARY KEY NOT NULL"
	      "  CHECK (length(host) BETWEEN 1 AND 63),"
	      " by_host TEXT NOT NULL CHECK (length(by_host) BETWEEN 1 AND 63),"
	      " vdisk_id TEXT NOT NULL CHECK (length(vdisk_id) BETWEEN 1 AND "
	      "63),"
	      " epoch INTEGER NOT NULL CHECK (epoch >= 1),"
	      " since INTEGER NOT NULL CHECK (since >= 0)"
	      ") WITHOUT ROWID;",
	[4] = "ALTER TABLE servers ADD COLUMN host TEXT NOT NULL DEFAULT ''"
	      " CHECK (length(host) <= 63);"
	      "ALTER TABLE servers ADD COLUMN rack TEXT NOT NULL DEFAULT ''"
	      " CHECK (length(rack) <= 63);"
	      "ALTER TABLE servers ADD COLUMN site TEXT NOT NULL DEFAULT ''"
	      " CHECK (length(site) <= 63);"
	      "UPDATE servers SET host = replace(replace(address, ':', '-'),"
	      " '%', '-');"
	      "CREATE TABLE spread_notes ("
	      " vdisk_id TEXT NOT NULL REFERENCES vdisks (id),"
	      " col INTEGER NOT NULL CHECK (col >= 0),"
	      " ext INTEGER NOT NULL CHECK (ext >= 0),"
	      " reached INTEGER NOT NULL CHECK (reached BETWEEN 0 AND 2),"
	      " wanted INTEGER NOT NULL CHECK (wanted BETWEEN 1 AND 2),"
	      " room INTEGER NOT NULL CHECK (room >= 0),"
	      " CHECK (reached < wanted),"
	      " PRIMARY KEY (vdisk_id, col, ext)"
	      ") WITHOUT ROWID;",
	[5] = "ALTER TABLE servers ADD COLUMN failed INTEGER NOT NULL"
	      " DEFAULT 0 CHECK (failed IN (0, 1));"
	      "CREATE TABLE moves ("
	      " vdisk_id TEXT NOT NULL REFERENCES vdisks (id),"
	      " col INTEGER NOT NULL CHECK (col >= 0),"
	      " ext INTEGER NOT NULL CHECK (ext >= 0),"
	      " replica INTEGER NOT NULL CHECK (replica >= 0),"
	      " old_server INTEGER NOT NULL REFERENCES servers (id),"
	      " old_idx INTEGER NOT NULL CHECK (old_idx >= 0),"
	      " new_server INTEGER NOT NULL REFERENCES servers (id),"
	      " new_idx INTEGER NOT NULL CHECK (new_idx >= 0),"
	      " reason INTEGER NOT NULL CHECK (reason IN (0, 1)),"
	      " since INTEGER NOT NULL CHECK (since >= 0),"
	      " reached INTEGER NOT NULL CHECK (reached BETWEEN 0 AND 2),"
	      " wanted INTEGER NOT NULL CHECK (wanted BETWEEN 0 AND 2),"
	      " room INTEGER NOT NULL CHECK (room >= 0),"
	      " CHECK (new_server != old_server),"
	      " PRIMARY KEY (vdisk_id, col, ext, replica),"
	      " UNIQUE (new_server, new_idx)"
	      ") WITHOUT ROWID;"
	      "CREATE INDEX moves_old ON moves (old_server);",
	[6] = "ALTER TABLE servers ADD COLUMN chap_user TEXT NOT NULL"
	      " DEFAULT '' CHECK (length(chap_user) <= 255);"
	      "ALTER TABLE servers ADD COLUMN chap_secret TEXT NOT NULL"
	      " DEFAULT '' CHECK (length(chap_secret) <= 255);",
	[7] = "ALTER TABLE vdisks ADD COLUMN source TEXT NOT NULL"
	      " DEFAULT '' CHECK (length(source) <= 63);"
	      "ALTER TABLE vdisks ADD COLUMN complete INTEGER NOT NULL"
	      " DEFAULT 1 CHECK (complete IN (0, 1));",
};

static const char *const stmt_sql[ST_COUNT] = {
	[ST_BEGIN] = "BEGIN IMMEDIATE",
	[ST_COMMIT] = "COMMIT",
	[ST_ROLLBACK] = "ROLLBACK",
	[ST_SAVEPOINT] = "SAVEPOINT call",
	[ST_RELEASE] = "RELEASE call",
	[ST_ROLLBACK_TO] = "ROLLBACK TO call",
	[ST_SERVER_BY_KEY] = "SELECT " STORE_SERVER_COLS
			     " FROM servers WHERE target = ?1 AND lun = ?2",
	[ST_SERVER_INSERT] = "INSERT INTO servers (address, portal, target,"
			     " lun, size_bytes, block_size, nr_extents,"
			     " free_extents, host, rack, site) VALUES (?1, ?2,"
			     " ?3, ?4, ?5, ?6, ?7, ?7, ?8, ?9, ?10)",
	[ST_SERVER_COUNT] = "SELECT count(*) FROM servers",
	[ST_SERVER_DRAIN] = "UPDATE servers SET draining = 1 WHERE id = ?1",
	[ST_SERVER_VDISKS] = "SELECT DISTINCT vdisk_id FROM allocations"
			     " WHERE server_id = ?1 ORDER BY vdisk_id LIMIT 4",
	[ST_SERVER_DELETE_RELEASED] = "DELETE FROM released"
				      " WHERE server_id = ?1",
	[ST_SERVER_DELETE] = "DELETE FROM servers WHERE id = ?1",
	[ST_SERVERS_ALL] =
		"SELECT " STORE_SERVER_COLS " FROM servers ORDER BY id",
	[ST_PLACE_SERVERS] = "SELECT id, host, CASE WHEN draining = 0 AND"
			     " failed = 0 THEN free_extents ELSE 0 END,"
			     " next_fresh, rack, site, draining, failed"
			     " FROM servers ORDER BY id",
	[ST_RELEASED_LOWEST] = "SELECT idx FROM released WHERE server_id = ?1"
			       " ORDER BY idx LIMIT ?2",
	[ST_RELEASED_TAKE] = "DELETE FROM released WHERE server_id = ?1"
			     " AND idx = ?2",
	[ST_SERVER_TAKE] = "UPDATE servers SET free_extents = free_extents"
			   " - ?2, next_fresh = ?3 WHERE id = ?1",
	[ST_ALLOC_INSERT] = "INSERT INTO allocations (vdisk_id, col, ext,"
			    " replica, server_id, idx)"
			    " VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
	[ST_VDISK_GET] = "SELECT columns, extents_per_column, replicas"
			 " FROM vdisks WHERE id = ?1",
	[ST_VDISK_INSERT] = "INSERT INTO vdisks (id, columns,"
			    " extents_per_column, replicas)"
			    " VALUES (?1, ?2, ?3, ?4)",
	[ST_VDISK_EXTENTS] = "SELECT server_id, idx, stale FROM allocations"
			     " WHERE vdisk_id = ?1 ORDER BY col, ext, replica",
	[ST_SERVER_BY_ID] =
		"SELECT " STORE_SERVER_COLS " FROM servers WHERE id = ?1",
	[ST_VDISK_GIVE_BACK] = "UPDATE servers SET free_extents ="
			       " free_extents + c.n FROM (SELECT server_id,"
			       " count(*) AS n FROM allocations WHERE"
			       " vdisk_id = ?1 GROUP BY server_id) AS c"
			       " WHERE servers.id = c.server_id",
	[ST_VDISK_TO_RELEASED] = "INSERT INTO released (server_id, idx)"
				 " SELECT server_id, idx FROM allocations"
				 " WHERE vdisk_id = ?1",
	[ST_VDISK_FREE] = "DELETE FROM allocations WHERE vdisk_id = ?1",
	[ST_VDISK_DELETE] = "DELETE FROM vdisks WHERE id = ?1",
	[ST_VDISK_LIST] = "SELECT id, columns, extents_per_column, replicas,"
			  " (SELECT count(*) FROM allocations a WHERE"
			  " a.vdisk_id = v.id AND a.stale = 1),"
			  " (SELECT count(DISTINCT a.col * 4294967296 + a.ext)"
			  " FROM allocations a JOIN servers s ON"
			  " s.id = a.server_id WHERE a.vdisk_id = v.id AND"
			  " (a.stale = 1 OR s.failed = 1)),"
			  " (SELECT count(*) FROM moves m WHERE"
			  " m.vdisk_id = v.id), source, complete"
			  " FROM vdisks v WHERE id > ?1 ORDER BY id LIMIT ?2",
	[ST_SERVER_ALLOCS_FROM] =
		"SELECT idx, vdisk_id, col, ext, replica,"
		" stale, 0 FROM allocations WHERE"
		" server_id = ?1 AND idx >= ?2 UNION ALL"
		" SELECT new_idx, vdisk_id, col, ext, replica,"
		" 0, 1 FROM moves WHERE new_server = ?1 AND"
		" new_idx >= ?2 ORDER BY 1",
	[ST_REPLICA_GET] = "SELECT server_id, idx, stale FROM allocations"
			   " WHERE vdisk_id = ?1 AND col = ?2 AND ext = ?3"
			   " AND replica = ?4",
	[ST_REPLICA_SET] = "UPDATE allocations SET stale = ?5"
			   " WHERE vdisk_id = ?1 AND col = ?2 AND ext = ?3"
			   " AND replica = ?4",
	[ST_LEASE_GET] = "SELECT holder, epoch, previous, fence, since,"
			 " fence_pending FROM leases WHERE vdisk_id = ?1",
	[ST_LEASE_PUT] = "INSERT OR REPLACE INTO leases (vdisk_id, holder,"
			 " epoch, previous, fence, since, fence_pending)"
			 " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
	[ST_LEASE_FREE] = "UPDATE leases SET previous = holder, holder = '',"
			  " fence = 0, fence_pending = 0, since = ?2"
			  " WHERE vdisk_id = ?1 AND holder != ''",
	/* The new extents of moves are written too (issue #19). */
	[ST_LEASE_SERVERS] = "SELECT " STORE_SERVER_COLS " FROM servers"
			     " WHERE id IN (SELECT server_id FROM allocations"
			     " WHERE vdisk_id = ?1 UNION SELECT new_server"
			     " FROM moves WHERE vdisk_id = ?1) ORDER BY id",
	[ST_FENCED_GET] = "SELECT by_host, vdisk_id, epoch, since"
			  " FROM fenced_hosts WHERE host = ?1",
	[ST_FENCED_PUT] =
		"INSERT OR REPLACE INTO fenced_hosts (host, by_host,"
		" vdisk_id, epoch, since) VALUES (?1, ?2, ?3, ?4, ?5)",
	[ST_FENCED_DELETE] = "DELETE FROM fenced_hosts WHERE host = ?1",
	[ST_FENCED_ALL] = "SELECT host, by_host, vdisk_id, epoch, since"
			  " FROM fenced_hosts ORDER BY host LIMIT ?1",
	[ST_SERVER_LABEL] = "UPDATE servers SET host = ?2, rack = ?3,"
			    " site = ?4 WHERE id = ?1",
	/* Replicas of one extent on server ?1 and on a host ?2: held ones,
	 * and the new extents of moves (issue #19) either way. */
	[ST_LABEL_CLASH] =
		"SELECT a.vdisk_id, a.col, a.ext, b.server_id"
		" FROM allocations a JOIN allocations b"
		" ON b.vdisk_id = a.vdisk_id AND b.col = a.col"
		" AND b.ext = a.ext AND b.server_id != a.server_id"
		" JOIN servers s ON s.id = b.server_id"
		" WHERE a.server_id = ?1 AND s.host = ?2"
		" UNION ALL SELECT m.vdisk_id, m.col, m.ext, a.server_id"
		" FROM moves m JOIN allocations a ON a.vdisk_id = m.vdisk_id"
		" AND a.col = m.col AND a.ext = m.ext AND a.replica != "
		"m.replica"
		" JOIN servers s ON s.id = a.server_id"
		" WHERE m.new_server = ?1 AND s.host = ?2"
		" UNION ALL SELECT m.vdisk_id, m.col, m.ext, m.new_server"
		" FROM moves m JOIN allocations a ON a.vdisk_id = m.vdisk_id"
		" AND a.col = m.col AND a.ext = m.ext AND a.replica != "
		"m.replica"
		" JOIN servers s ON s.id = m.new_server"
		" WHERE a.server_id = ?1 AND s.host = ?2 LIMIT 1",
	[ST_SPREAD_INSERT] = "INSERT INTO spread_notes (vdisk_id, col, ext,"
			     " reached, wanted, room)"
			     " VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
	[ST_SPREAD_GET] = "SELECT col, ext, reached, wanted, room"
			  " FROM spread_notes WHERE vdisk_id = ?1"
			  " ORDER BY col, ext",
	[ST_SPREAD_DELETE] = "DELETE FROM spread_notes WHERE vdisk_id = ?1",
	[ST_SERVER_FAIL] = "UPDATE servers SET failed = 1 WHERE id = ?1",
	[ST_SERVER_STATE] = "SELECT failed, (SELECT count(*) FROM allocations"
			    " a WHERE a.server_id = s.id), (SELECT count(*)"
			    " FROM moves m WHERE m.new_server = s.id)"
			    " FROM servers s WHERE id = ?1",
	[ST_SERVER_FAILED] = "SELECT failed FROM servers WHERE id = ?1",
	[ST_SERVER_STATS] = "SELECT id, draining, failed, (SELECT count(*)"
			    " FROM allocations a WHERE a.server_id = s.id),"
			    " (SELECT count(*) FROM allocations a WHERE"
			    " a.server_id = s.id AND a.stale = 1),"
			    " (SELECT count(*) FROM moves m WHERE"
			    " m.old_server = s.id), (SELECT count(*) FROM"
			    " moves m WHERE m.new_server = s.id)"
			    " FROM servers s ORDER BY id",
	[ST_MOVE_GET] = "SELECT " STORE_MOVE_COLS " FROM moves"
			" WHERE vdisk_id = ?1 AND col = ?2 AND ext = ?3"
			" AND replica = ?4",
	[ST_MOVE_INSERT] = "INSERT INTO moves (vdisk_id, col, ext, replica,"
			   " old_server, old_idx, new_server, new_idx,"
			   " reason, since, reached, wanted, room) VALUES"
			   " (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11,"
			   " ?12, ?13)",
	[ST_MOVE_DELETE] = "DELETE FROM moves WHERE vdisk_id = ?1 AND"
			   " col = ?2 AND ext = ?3 AND replica = ?4",
	[ST_MOVE_SIBLINGS] = "SELECT server_id FROM allocations WHERE"
			     " vdisk_id = ?1 AND col = ?2 AND ext = ?3 AND"
			     " replica != ?4 UNION SELECT new_server FROM"
			     " moves WHERE vdisk_id = ?1 AND col = ?2 AND"
			     " ext = ?3 AND replica != ?4",
	[ST_MOVE_LIST] = "SELECT " STORE_MOVE_COLS " FROM moves WHERE"
			 " (?1 = '' OR vdisk_id = ?1) AND (?2 = 0 OR"
			 " old_server = ?3 OR new_server = ?3) AND (?4 = 0 OR"
			 " (vdisk_id, col, ext, replica) > (?5, ?6, ?7, ?8))"
			 " ORDER BY vdisk_id, col, ext, replica LIMIT ?9",
	[ST_REPLICA_MOVE] = "UPDATE allocations SET server_id = ?5, idx = ?6,"
			    " stale = 0 WHERE vdisk_id = ?1 AND col = ?2 AND"
			    " ext = ?3 AND replica = ?4",
	[ST_EXTENT_FREE] = "UPDATE servers SET free_extents = free_extents"
			   " + 1 WHERE id = ?1",
	[ST_RELEASED_PUT] = "INSERT INTO released (server_id, idx)"
			    " VALUES (?1, ?2)",
	[ST_SPREAD_DELETE_ONE] = "DELETE FROM spread_notes WHERE"
				 " vdisk_id = ?1 AND col = ?2 AND ext = ?3",
	[ST_VDISK_MOVES_GIVE_BACK] =
		"UPDATE servers SET free_extents = free_extents + c.n FROM"
		" (SELECT new_server, count(*) AS n FROM moves WHERE"
		" vdisk_id = ?1 GROUP BY new_server) AS c"
		" WHERE servers.id = c.new_server",
	[ST_VDISK_MOVES_TO_RELEASED] = "INSERT INTO released (server_id, idx)"
				       " SELECT new_server, new_idx FROM moves"
				       " WHERE vdisk_id = ?1",
	[ST_VDISK_MOVES_DELETE] = "DELETE FROM moves WHERE vdisk_id = ?1",
	[ST_VDISK_MOVES] = "SELECT " STORE_MOVE_COLS " FROM moves WHERE"
			   " vdisk_id = ?1 ORDER BY col, ext, replica",
	[ST_SERVER_CHAP_GET] = "SELECT chap_user, chap_secret FROM servers"
			       " WHERE id = ?1",
	[ST_SERVER_CHAP_SET] = "UPDATE servers SET chap_user = ?2,"
			       " chap_secret = ?3 WHERE id = ?1",
	[ST_VDISK_SNAP_GET] =
		"SELECT source, complete FROM vdisks WHERE id = ?1",
	[ST_VDISK_SNAP_SET] = "UPDATE vdisks SET source = ?2, complete = 0"
			      " WHERE id = ?1",
	[ST_VDISK_SNAP_DONE] = "UPDATE vdisks SET complete = 1 WHERE id = ?1",
	[ST_INFO] = "SELECT (SELECT count(*) FROM servers),"
		    " (SELECT count(*) FROM vdisks),"
		    " (SELECT coalesce(sum(nr_extents), 0) FROM servers),"
		    " (SELECT coalesce(sum(free_extents), 0) FROM servers)",
	[ST_VDISK_GROW] = "UPDATE vdisks SET extents_per_column = ?2"
			  " WHERE id = ?1",
};

/* --- helpers ------------------------------------------------------------------ */

sqlite3_stmt *master_store_stmt(struct master_store *st,
				enum master_store_stmt id)
{
	sqlite3_stmt *s = st->stmt[id];

	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	return s;
}

int master_store_sql_fail(struct master_store *st, const char *what, int rc)
{
	td_err("%s: %s: %s (sqlite %d)", st->path, what, sqlite3_errmsg(st->db),
	       rc);
	switch (rc & 0xff) {
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_NOMEM:
		return -ENOMEM;
	default:
		return -EIO;
	}
}

int master_store_exec(struct master_store *st, sqlite3_stmt *s,
		      const char *what)
{
	int rc = sqlite3_step(s);

	sqlite3_reset(s);
	return rc == SQLITE_DONE ? 0 : master_store_sql_fail(st, what, rc);
}

int master_store_bind_text(sqlite3_stmt *s, int idx, const char *text)
{
	return sqlite3_bind_text(s, idx, text, -1, SQLITE_TRANSIENT);
}

bool master_store_token_ok(const char *s, size_t max)
{
	size_t len = s ? strnlen(s, max + 1) : 0;

	if (!len || len > max)
		return false;
	for (size_t i = 0; i < len; i++)
		if (s[i] <= ' ' || s[i] > '~')
			return false;
	return true;
}

bool master_vdisk_id_ok(const char *id)
{
	static const char ok[] = "abcdefghijklmnopqrstuvwxyz"
				 "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-";
	size_t len = id ? strnlen(id, MS_VDISK_ID_MAX + 1) : 0;

	return len && len <= MS_VDISK_ID_MAX && id[strspn(id, ok)] == '\0';
}

static char *column_dup(sqlite3_stmt *s, int col)
{
	return master_strdup((const char *)sqlite3_column_text(s, col));
}

int master_store_fill_server(sqlite3_stmt *s, int col, ms_server *out)
{
	memset(out, 0, sizeof(*out));
	out->id = (u_int)sqlite3_column_int64(s, col);
	out->address = column_dup(s, col + 1);
	out->portal = column_dup(s, col + 2);
	out->target = column_dup(s, col + 3);
	out->lun = (u_int)sqlite3_column_int64(s, col + 4);
	out->size_bytes = (u_quad_t)sqlite3_column_int64(s, col + 5);
	out->block_size = (u_int)sqlite3_column_int64(s, col + 6);
	out->nr_extents = (u_int)sqlite3_column_int64(s, col + 7);
	out->free_extents = (u_int)sqlite3_column_int64(s, col + 8);
	out->draining = sqlite3_column_int(s, col + 9) != 0;
	out->host = column_dup(s, col + 10);
	out->rack = column_dup(s, col + 11);
	out->site = column_dup(s, col + 12);
	return out->address && out->portal && out->target && out->host &&
			       out->rack && out->site
		       ? 0
		       : -ENOMEM;
}

uint64_t master_store_extent_size(const struct master_store *st)
{
	return st->extent_bytes;
}

int master_store_set_max_alloc(struct master_store *st, uint32_t extents)
{
	if (!extents || extents > MS_MAX_SLOTS)
		return -EINVAL;
	st->max_alloc_extents = extents;
	return 0;
}

/* --- transactions ------------------------------------------------------------- */

int master_store_begin(struct master_store *st)
{
	int ret =
		master_store_exec(st, master_store_stmt(st, ST_BEGIN), "begin");

	if (!ret && st->repl && (ret = master_repl_round_begin(st)))
		master_store_rollback(st);
	return ret;
}

int master_store_commit(struct master_store *st)
{
	if (st->repl)
		return master_repl_commit(st);
	return master_store_exec(st, master_store_stmt(st, ST_COMMIT),
				 "commit");
}

void master_store_rollback(struct master_store *st)
{
	master_repl_round_end(st);
	if (!sqlite3_get_autocommit(st->db))
		master_store_exec(st, master_store_stmt(st, ST_ROLLBACK),
				  "rollback");
}

bool master_store_in_transaction(const struct master_store *st)
{
	return !sqlite3_get_autocommit(st->db);
}

int master_store_call_begin(struct master_store *st)
{
	return master_store_exec(st, master_store_stmt(st, ST_SAVEPOINT),
				 "savepoint");
}

int master_store_call_end(struct master_store *st, bool ok)
{
	int ret = 0;

	if (!ok)
		ret = master_store_exec(st,
					master_store_stmt(st, ST_ROLLBACK_TO),
					"rollback to savepoint");
	if (!ret)
		ret = master_store_exec(st, master_store_stmt(st, ST_RELEASE),
					"release");
	return ret;
}

/* --- open ---------------------------------------------------------------------- */

static int exec_sql(struct master_store *st, const char *sql, char *msg,
		    size_t len)
{
	int rc = sqlite3_exec(st->db, sql, NULL, NULL, NULL);

	if (rc == SQLITE_OK)
		return 0;
	if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) {
		snprintf(msg, len,
			 "%s is in use by another stripe-master (or another "
			 "program): stop it, or give another --db",
			 st->path);
		return -EBUSY;
	}
	snprintf(msg, len, "%s: %s", st->path, sqlite3_errmsg(st->db));
	return rc == SQLITE_NOTADB ? -EINVAL : -EIO;
}

/* One integer from sql, or -1. */
static int64_t query_int(struct master_store *st, const char *sql)
{
	sqlite3_stmt *s;
	int64_t v = -1;

	if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK)
		return -1;
	if (sqlite3_step(s) == SQLITE_ROW)
		v = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return v;
}

/*
 * Bring a database of schema version (1 or more) to the current one; say
 * so in the log when it held data already (not when just created).
 */
static int migrate(struct master_store *st, int64_t version, bool upgrade,
		   char *msg, size_t len)
{
	char sql[96];
	int ret;

	for (int64_t v = version; v < MASTER_SCHEMA_VERSION; v++) {
		snprintf(sql, sizeof(sql),
			 "UPDATE meta SET schema_version = %" PRId64, v + 1);
		if ((ret = exec_sql(st, migrations[v], msg, len)) ||
		    (ret = exec_sql(st, sql, msg, len)))
			return ret;
		if (upgrade)
			td_info("%s: schema %" PRId64 " upgraded to %" PRId64,
				st->path, v, v + 1);
	}
	return 0;
}

/* Create the schema in an empty database, or read and check meta. */
static int load_meta(struct master_store *st, uint64_t extent_bytes, char *msg,
		     size_t len)
{
	bool created = false;
	char sql[128];
	int64_t version, e;
	int ret;

	if (query_int(st, "SELECT count(*) FROM sqlite_master") == 0) {
		if ((ret = exec_sql(st, schema_sql, msg, len)))
			return ret;
		snprintf(sql, sizeof(sql),
			 "INSERT INTO meta VALUES (1, 1, %" PRIu64 ")",
			 extent_bytes ? extent_bytes
				      : (uint64_t)MASTER_DEFAULT_EXTENT_BYTES);
		if ((ret = exec_sql(st, sql, msg, len)))
			return ret;
		created = true;
	}
	version = query_int(st, "SELECT schema_version FROM meta");
	e = query_int(st, "SELECT extent_size_bytes FROM meta");
	if (version > MASTER_SCHEMA_VERSION && e > 0) {
		snprintf(msg, len,
			 "%s has schema %" PRId64 ", newer than this "
			 "stripe-master's %d: run the newer stripe-master",
			 st->path, version, MASTER_SCHEMA_VERSION);
		return -EINVAL;
	}
	if (version < 1 || e <= 0) {
		snprintf(msg, len,
			 "%s is not a stripe-master database: give another "
			 "--db",
			 st->path);
		return -EINVAL;
	}
	if (extent_bytes && (uint64_t)e != extent_bytes) {
		snprintf(msg, len,
			 "%s was created with an extent size of %" PRId64
			 " bytes, not %" PRIu64
			 ": omit --extent-size or give that one",
			 st->path, e, extent_bytes);
		return -EINVAL;
	}
	if ((ret = migrate(st, version, !created, msg, len)))
		return ret;
	st->extent_bytes = (uint64_t)e;
	return 0;
}

static int prepare_all(struct master_store *st, char *msg, size_t len)
{
	for (int i = 0; i < ST_COUNT; i++)
		if (sqlite3_prepare_v3(st->db, stmt_sql[i], -1,
				       SQLITE_PREPARE_PERSISTENT, &st->stmt[i],
				       NULL) != SQLITE_OK) {
			snprintf(msg, len, "%s: preparing '%s': %s", st->path,
				 stmt_sql[i], sqlite3_errmsg(st->db));
			return -EIO;
		}
	return 0;
}

/*
 * One master per database: an exclusive flock on the database file, held
 * on a descriptor of our own until every SQLite connection is closed (so
 * that closing it cannot drop SQLite's own POSIX locks).
 */
static int lock_database(struct master_store *st, char *msg, size_t len)
{
	int err;

	st->lock_fd = open(st->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (st->lock_fd < 0) {
		err = errno;
		snprintf(msg, len, "cannot open %s: %s", st->path,
			 strerror(err));
		return -err;
	}
	if (!flock(st->lock_fd, LOCK_EX | LOCK_NB))
		return 0;
	err = errno;
	snprintf(msg, len,
		 "%s is in use by another stripe-master: stop it, or give "
		 "another --db",
		 st->path);
	return err == EWOULDBLOCK ? -EBUSY : -err;
}

/*
 * EXCLUSIVE locking: the master is the database's only user, so SQLite
 * keeps the log's index in memory and takes no file lock per transaction.
 * Checkpoints stay SQLite's own, inside the COMMIT that crosses
 * CHECKPOINT_FRAMES: small and frequent, they cost one round in about a
 * hundred a few milliseconds.  Measured on the development machines, a
 * checkpointing thread (which needs shared locking, hence a file lock per
 * transaction) gave fewer allocations per second and a worse p99, and
 * rarer, larger checkpoints stalled for longer.
 */
static int setup(struct master_store *st, uint64_t extent_bytes, char *msg,
		 size_t len)
{
	int ret;

	if ((ret = exec_sql(st,
			    "PRAGMA locking_mode = EXCLUSIVE;"
			    "PRAGMA journal_mode = WAL;"
			    "PRAGMA synchronous = FULL;"
			    "PRAGMA foreign_keys = ON;"
			    "PRAGMA temp_store = MEMORY;"
			    "PRAGMA cache_size = -65536;",
			    msg, len)))
		return ret;
	if ((ret = exec_sql(st, "BEGIN IMMEDIATE", msg, len)))
		return ret;
	ret = load_meta(st, extent_bytes, msg, len);
	if (!ret)
		ret = exec_sql(st, "COMMIT", msg, len);
	if (ret)
		sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
	if (!ret && query_int(st, "SELECT count(*) FROM pragma_journal_mode"
				  " WHERE journal_mode = 'wal'") != 1) {
		snprintf(msg, len, "%s: cannot switch to WAL mode", st->path);
		ret = -EIO;
	}
	sqlite3_wal_autocheckpoint(st->db, CHECKPOINT_FRAMES);
	/*
	 * Grow the database file in large steps: each growth is a metadata
	 * change that the file system must journal before an fsync returns.
	 */
	sqlite3_file_control(st->db, "main", SQLITE_FCNTL_CHUNK_SIZE,
			     &(int){DB_CHUNK_BYTES});
	return ret ? ret : prepare_all(st, msg, len);
}

int master_store_open(const char *path, uint64_t extent_bytes,
		      struct master_store **out, char *msg, size_t msg_len)
{
	struct master_store *st;
	int rc, ret;

	if (extent_bytes && (extent_bytes % MASTER_MIN_EXTENT_BYTES ||
			     extent_bytes > MASTER_MAX_EXTENT_BYTES)) {
		snprintf(msg, msg_len,
			 "the extent size must be a multiple of 1 MiB up to "
			 "1 TiB");
		return -EINVAL;
	}
	/*
	 * Memory statistics cost a global mutex per allocation and nothing
	 * here reads them.  Only possible before SQLite initialises; later
	 * calls fail harmlessly.
	 */
	sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
	if (!(st = calloc(1, sizeof(*st))) || !(st->path = strdup(path))) {
		free(st);
		return -ENOMEM;
	}
	st->lock_fd = -1;
	st->max_alloc_extents = MASTER_DEFAULT_MAX_ALLOC_EXTENTS;
	if ((ret = lock_database(st, msg, msg_len))) {
		master_store_close(st);
		return ret;
	}
	rc = sqlite3_open_v2(path, &st->db,
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
				     SQLITE_OPEN_NOMUTEX,
			     NULL);
	if (rc != SQLITE_OK) {
		snprintf(msg, msg_len, "cannot open %s: %s", path,
			 st->db ? sqlite3_errmsg(st->db) : "out of memory");
		master_store_close(st);
		return -EIO;
	}
	sqlite3_extended_result_codes(st->db, 1);
	if ((ret = setup(st, extent_bytes, msg, msg_len))) {
		master_store_close(st);
		return ret;
	}
	*out = st;
	return 0;
}

void master_store_close(struct master_store *st)
{
	if (!st)
		return;
	master_repl_free(st);
	for (int i = 0; i < ST_COUNT; i++)
		sqlite3_finalize(st->stmt[i]);
	for (int i = 0; i < STORE_NR_INVARIANTS; i++)
		sqlite3_finalize(st->check_stmt[i]);
	if (st->db && !sqlite3_get_autocommit(st->db))
		sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
	sqlite3_close(st->db); /* the last checkpoint; the log is removed */
	if (st->lock_fd >= 0)
		close(st->lock_fd);
	free(st->path);
	free(st);
}

/* --- MS_INFO and the check --------------------------------------------------- */

int master_store_info(struct master_store *st, ms_reply *rep)
{
	sqlite3_stmt *s = master_store_stmt(st, ST_INFO);
	ms_info *info = &rep->body.ms_body_u.info;
	int rc = sqlite3_step(s);

	if (rc != SQLITE_ROW)
		return master_store_sql_fail(st, "info", rc);
	rep->body.kind = MS_BODY_INFO;
	info->protocol = STRIPE_MASTER_V1;
	info->extent_size_bytes = st->extent_bytes;
	info->nr_servers = (u_int)sqlite3_column_int64(s, 0);
	info->nr_vdisks = (u_int)sqlite3_column_int64(s, 1);
	info->nr_extents = (u_quad_t)sqlite3_column_int64(s, 2);
	info->free_extents = (u_quad_t)sqlite3_column_int64(s, 3);
	sqlite3_reset(s);
	return master_reply_ok(rep, false);
}
