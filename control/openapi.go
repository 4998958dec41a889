package control

import (
	_ "embed"
	"net/http"
)

// openAPIDocument is the API's contract: an OpenAPI 3.1 document, written by
// hand and served as is. TestOpenAPIRoutes and TestOpenAPISchemas fail when it
// and the routes (apiRoutes) or the wire types (package client) differ.
//
//go:embed openapi.json
var openAPIDocument []byte

// openAPI serves the document. On TCP it needs the token, as every route does:
// the document holds nothing secret (it is in the repository), but one rule for
// the whole listener is simpler to trust than a list of exceptions.
func (s *server) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPIDocument)
}
