package dbsuite

import "github.com/moirai-go/moirai/bench"

// PostgresList is the PostgreSQL suite in words, for moirai bench list.
func PostgresList() bench.Listing {
	return list(SuitePostgres, "PostgreSQL locks", "pgbench clients", PostgresCases(),
		func(c Case) (string, string) { return c.Name, c.Describe }, PostgresControllers())
}

// MySQLList is the MariaDB suite in words, for moirai bench list.
func MySQLList() bench.Listing {
	return list(SuiteMySQL, "MariaDB locks and buffer pool", "sysbench threads", MySQLCases(),
		func(c MySQLCase) (string, string) { return c.Name, c.Describe }, MySQLControllers())
}

func list[C any](suite, resource, victims string, cases []C, words func(C) (name, culprit string), ctls []Controller) bench.Listing {
	l := bench.Listing{Suite: suite}
	for _, c := range cases {
		name, culprit := words(c)
		l.Cases = append(l.Cases, bench.About{Suite: suite, Name: name, Models: "moirai guard", Resource: resource, Culprit: culprit, Victims: victims})
	}
	for _, c := range ctls {
		l.Controllers = append(l.Controllers, bench.Named{Name: c.Name, Describe: c.Describe})
	}
	return l
}
