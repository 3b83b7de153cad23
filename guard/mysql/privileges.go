package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// superACL is SUPER's bit in mysql.global_priv's access mask (MariaDB's
// privilege_t: SELECT is bit 0, SUPER bit 15; ALL PRIVILEGES sets it).
const superACL = 1 << 15

// privsTTL is how long the accounts' privileges are cached.
const privsTTL = time.Minute

// privileges is what the guard read of the accounts: the user names of
// which some account, directly or through a role, has SUPER. Sessions
// show their user name, not the account (user@host pattern) they logged
// in as, so a name is a superuser's when any of its accounts is.
type privileges struct {
	loaded   time.Time
	readable bool
	super    map[string]bool
}

// load reads mysql.global_priv and mysql.roles_mapping.
func (p *privileges) load(ctx context.Context, db *sql.DB, now time.Time) error {
	p.loaded, p.readable = now, false
	access := map[string]uint64{} // user (or role) name → its accounts' masks OR-ed
	rows, err := db.QueryContext(ctx, `SELECT User, CAST(COALESCE(JSON_VALUE(Priv, '$.access'), '0') AS UNSIGNED) FROM mysql.global_priv`)
	if err != nil {
		return fmt.Errorf("guard/mysql: reading mysql.global_priv: %w", err)
	}
	for rows.Next() {
		var u string
		var a uint64
		if err := rows.Scan(&u, &a); err != nil {
			rows.Close()
			return err
		}
		access[u] |= a
	}
	if err := rows.Close(); err != nil {
		return err
	}
	roles := map[string][]string{}
	rows, err = db.QueryContext(ctx, `SELECT User, Role FROM mysql.roles_mapping`)
	if err != nil {
		return fmt.Errorf("guard/mysql: reading mysql.roles_mapping: %w", err)
	}
	for rows.Next() {
		var u, r string
		if err := rows.Scan(&u, &r); err != nil {
			rows.Close()
			return err
		}
		roles[u] = append(roles[u], r)
	}
	if err := rows.Close(); err != nil {
		return err
	}
	p.super = map[string]bool{}
	for u := range access {
		p.super[u] = superOf(u, access, roles, map[string]bool{})
	}
	p.readable = true
	return nil
}

// superOf reports whether name, or a role granted to it (transitively),
// has SUPER.
func superOf(name string, access map[string]uint64, roles map[string][]string, seen map[string]bool) bool {
	if seen[name] {
		return false
	}
	seen[name] = true
	if access[name]&superACL != 0 {
		return true
	}
	for _, r := range roles[name] {
		if superOf(r, access, roles, seen) {
			return true
		}
	}
	return false
}

// isSuper reports whether a session of user must be treated as a
// superuser's: root, an account with SUPER (directly or by a role), or
// any account when the privileges cannot be read (fails closed). The
// guard's own user is what Check found.
func (s *Source) isSuper(ctx context.Context, user string, now time.Time) bool {
	switch {
	case user == "":
		return false // a server thread, whose Kind protects it
	case user == "root":
		return true
	case user == s.user:
		return s.selfSup
	}
	if now.Sub(s.privs.loaded) >= privsTTL || now.Before(s.privs.loaded) {
		_ = s.privs.load(ctx, s.db, now) // failing, readable is false: closed
	}
	if !s.privs.readable {
		return true
	}
	v, known := s.privs.super[user]
	return v || !known // an account created since the last read: closed
}
