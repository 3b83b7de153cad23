package guard

import "regexp"

// Protection says which sessions the guard never acts on.
type Protection struct {
	Users, Applications []string       // exact names
	Queries             *regexp.Regexp // statements matching it
	AllowSuperuser      bool           // superusers may be acted on
	AllowMaintenance    bool           // sessions other than "client" may be
}

// Protects reports whether p protects s, and why.
func (p *Protection) Protects(s *Session) (bool, string) {
	switch {
	case s.Own:
		return true, "the guard's own session"
	case s.Superuser && !p.AllowSuperuser:
		return true, "superuser session"
	case s.Kind != "client" && !p.AllowMaintenance:
		return true, "server session of kind " + s.Kind
	}
	for _, u := range p.Users {
		if s.User == u {
			return true, "protected user " + u
		}
	}
	for _, a := range p.Applications {
		if s.Application == a {
			return true, "protected application " + a
		}
	}
	if p.Queries != nil && p.Queries.MatchString(s.Query) {
		return true, "statement matches the protected pattern"
	}
	return false, ""
}
