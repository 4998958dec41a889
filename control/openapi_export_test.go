package control

// APIRoutes lists the API's routes as "METHOD /path" (the table the daemon's
// mux is built from), for TestOpenAPIRoutes.
func APIRoutes() []string {
	var out []string
	for _, rt := range apiRoutes {
		out = append(out, rt.method+" "+rt.path)
	}
	return out
}

// OpenAPIDocument is the document GET /v1/openapi.json serves.
func OpenAPIDocument() []byte { return openAPIDocument }
