/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * store-check.c - the store's consistency check (master_store_check, see
 * store.h): every invariant the schema cannot express alone, and those it
 * does, in case the file was edited behind the master's back.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "master/server/store-int.h"

/*
 * 1 when invariant i's query returns a row, 0 when not, -EIO when it
 * fails.  The statement is kept for the next check: a caller that checks
 * often (the fuzzer, after every input) would otherwise spend most of the
 * check compiling SQL.
 */
static int query_has_row(struct master_store *st, int i, const char *sql)
{
	sqlite3_stmt *s = st->check_stmt[i];
	int rc;

	if (!s &&
	    (rc = sqlite3_prepare_v3(st->db, sql, -1, SQLITE_PREPARE_PERSISTENT,
				     &s, NULL)) != SQLITE_OK)
		return master_store_sql_fail(st, "check", rc);
	st->check_stmt[i] = s;
	rc = sqlite3_step(s);
	sqlite3_reset(s);
	if (rc == SQLITE_ROW)
		return 1;
	return rc == SQLITE_DONE ? 0 : master_store_sql_fail(st, "check", rc);
}

/* Each query returns a row only when its invariant is broken. */
static const struct {
	const char *what;
	const char *sql;
} invariants[] = {
	{"foreign keys", "SELECT 1 FROM pragma_foreign_key_check LIMIT 1"},
	{"free_extents of a server differs from nr_extents minus its "
	 "allocated extents",
	 "SELECT id FROM servers s WHERE free_extents != nr_extents -"
	 " (SELECT count(*) FROM allocations a WHERE a.server_id = s.id) -"
	 " (SELECT count(*) FROM moves m WHERE m.new_server = s.id)"},
	{"allocated and released extents of a server do not add up to "
	 "next_fresh",
	 "SELECT id FROM servers s WHERE next_fresh != (SELECT count(*)"
	 " FROM allocations a WHERE a.server_id = s.id) + (SELECT count(*)"
	 " FROM released r WHERE r.server_id = s.id) + (SELECT count(*)"
	 " FROM moves m WHERE m.new_server = s.id)"},
	{"an allocated or released extent lies beyond next_fresh",
	 "SELECT 1 FROM servers s WHERE EXISTS (SELECT 1 FROM allocations a"
	 " WHERE a.server_id = s.id AND a.idx >= s.next_fresh) OR EXISTS"
	 " (SELECT 1 FROM released r WHERE r.server_id = s.id AND"
	 " r.idx >= s.next_fresh) OR EXISTS (SELECT 1 FROM moves m WHERE"
	 " m.new_server = s.id AND m.new_idx >= s.next_fresh)"},
	{"an extent is both allocated and released",
	 "SELECT 1 FROM allocations a JOIN released r"
	 " ON r.server_id = a.server_id AND r.idx = a.idx"},
	{"an extent has two owners",
	 "SELECT 1 FROM allocations GROUP BY server_id, idx"
	 " HAVING count(*) > 1"},
	{"a move's new extent is also allocated or released (two owners)",
	 "SELECT 1 FROM moves m WHERE EXISTS (SELECT 1 FROM allocations a"
	 " WHERE a.server_id = m.new_server AND a.idx = m.new_idx) OR EXISTS"
	 " (SELECT 1 FROM released r WHERE r.server_id = m.new_server AND"
	 " r.idx = m.new_idx)"},
	{"a move is recorded for a disk that does not exist",
	 "SELECT 1 FROM moves m WHERE NOT EXISTS"
	 " (SELECT 1 FROM vdisks v WHERE v.id = m.vdisk_id)"},
	{"a move's old extent is not its slot's replica any more",
	 "SELECT 1 FROM moves m WHERE NOT EXISTS (SELECT 1 FROM allocations a"
	 " WHERE a.vdisk_id = m.vdisk_id AND a.col = m.col AND a.ext = m.ext"
	 " AND a.replica = m.replica AND a.server_id = m.old_server AND"
	 " a.idx = m.old_idx)"},
	{"a move's new extent is on its old server, or on the host of another "
	 "replica of its extent",
	 "SELECT 1 FROM moves m JOIN servers sn ON sn.id = m.new_server"
	 " WHERE m.new_server = m.old_server OR EXISTS (SELECT 1 FROM"
	 " allocations a JOIN servers s ON s.id = a.server_id WHERE"
	 " a.vdisk_id = m.vdisk_id AND a.col = m.col AND a.ext = m.ext AND"
	 " a.replica != m.replica AND s.host = sn.host)"},
	{"a server's failed flag is not 0 or 1",
	 "SELECT 1 FROM servers WHERE failed NOT IN (0, 1)"},
	{"a disk does not own columns * extents_per_column * replicas extents",
	 "SELECT id FROM vdisks v WHERE columns * extents_per_column *"
	 " replicas != (SELECT count(*) FROM allocations WHERE"
	 " vdisk_id = v.id)"},
	{"an extent slot is outside its disk's geometry",
	 "SELECT 1 FROM allocations a JOIN vdisks v ON v.id = a.vdisk_id WHERE"
	 " a.col >= v.columns OR a.ext >= v.extents_per_column OR"
	 " a.replica >= v.replicas"},
	{"two replicas of one extent are on one host",
	 "SELECT 1 FROM allocations a JOIN allocations b ON"
	 " a.vdisk_id = b.vdisk_id AND a.col = b.col AND a.ext = b.ext AND"
	 " a.replica < b.replica JOIN servers sa ON sa.id = a.server_id"
	 " JOIN servers sb ON sb.id = b.server_id"
	 " WHERE sa.host = sb.host"},
	{"a server has no host label, or a host, rack or site label is not "
	 "0-63 of [A-Za-z0-9._-] (stripe-ctl server label)",
	 "SELECT 1 FROM servers WHERE host = '' OR length(host) > 63 OR"
	 " length(rack) > 63 OR length(site) > 63 OR"
	 " host GLOB '*[^A-Za-z0-9._-]*' OR rack GLOB '*[^A-Za-z0-9._-]*' OR"
	 " site GLOB '*[^A-Za-z0-9._-]*'"},
	{"a spread note names an extent outside its disk's geometry, or a "
	 "disk of one replica",
	 "SELECT 1 FROM spread_notes n LEFT JOIN vdisks v ON v.id = n.vdisk_id"
	 " WHERE v.id IS NULL OR n.col >= v.columns OR"
	 " n.ext >= v.extents_per_column OR v.replicas < 2 OR"
	 " n.reached >= n.wanted"},
	{"a lease is held on a disk that does not exist",
	 "SELECT 1 FROM leases l WHERE holder != '' AND NOT EXISTS"
	 " (SELECT 1 FROM vdisks v WHERE v.id = l.vdisk_id)"},
	{"a free lease has a fence pending",
	 "SELECT 1 FROM leases WHERE holder = '' AND fence_pending != 0"},
	{"a server has half a CHAP account (a user without a secret or the "
	 "other way round), or one that is not 1-255 printable bytes without "
	 "spaces or '#' (stripe-ctl server chap)",
	 "SELECT 1 FROM servers WHERE (chap_user = '') != (chap_secret = '')"
	 " OR length(chap_user) > 255 OR length(chap_secret) > 255 OR"
	 " chap_user GLOB '*[^!-~]*' OR chap_secret GLOB '*[^!-~]*' OR"
	 " instr(chap_user, '#') OR instr(chap_secret, '#')"},
};

_Static_assert(sizeof(invariants) / sizeof(invariants[0]) ==
		       STORE_NR_INVARIANTS,
	       "STORE_NR_INVARIANTS counts the invariants");

int master_store_check_invariants(struct master_store *st, char *msg,
				  size_t msg_len)
{
	for (size_t i = 0; i < sizeof(invariants) / sizeof(invariants[0]);
	     i++) {
		int broken = query_has_row(st, (int)i, invariants[i].sql);

		if (broken < 0)
			return broken;
		if (broken) {
			snprintf(msg, msg_len, "%s: %s", st->path,
				 invariants[i].what);
			return -EUCLEAN;
		}
	}
	return 0;
}

int master_store_check(struct master_store *st, char *msg, size_t msg_len)
{
	sqlite3_stmt *s;
	int rc;

	if (sqlite3_prepare_v2(st->db, "PRAGMA quick_check", -1, &s, NULL))
		return master_store_sql_fail(st, "quick_check", SQLITE_ERROR);
	rc = sqlite3_step(s);
	if (rc != SQLITE_ROW ||
	    strcmp((const char *)sqlite3_column_text(s, 0), "ok")) {
		snprintf(msg, msg_len, "%s: quick_check: %s", st->path,
			 rc == SQLITE_ROW
				 ? (const char *)sqlite3_column_text(s, 0)
				 : sqlite3_errmsg(st->db));
		sqlite3_finalize(s);
		return -EUCLEAN;
	}
	sqlite3_finalize(s);
	return master_store_check_invariants(st, msg, msg_len);
}
