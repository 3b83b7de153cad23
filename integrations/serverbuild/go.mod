module github.com/moirai-go/moirai/integrations/serverbuild

go 1.25.0
