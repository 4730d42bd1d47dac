module github.com/worldgate/worldgate/schemas

go 1.26
