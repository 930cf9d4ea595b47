package authn

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/mcp-proxy/mcp-proxy/config"
	"github.com/mcp-proxy/mcp-proxy/metrics"
)

// Results of an authentication: the values of the result label of
// mcp_proxy_auth_total, and Failure.Result.
const (
	// ResultOK: a credential was required and accepted.
	ResultOK = "ok"
	// ResultMissing: no bearer token where one is required.
	ResultMissing = "missing"
	// ResultInvalid: a token that is not a static token of the agent and not
	// a valid access token (malformed, bad signature, unknown key, wrong
	// issuer, disallowed algorithm, inactive).
	ResultInvalid = "invalid"
	// ResultExpired: an access token past its exp (60 s of skew allowed).
	ResultExpired = "expired"
	// ResultWrongAudience: a valid access token for another resource.
	ResultWrongAudience = "wrong_audience"
	// ResultInsufficientScope: a valid token lacking a required scope.
	ResultInsufficientScope = "insufficient_scope"
	// ResultNoAgent: on the default endpoint, no agent's match rules hold
	// for the token's claims.
	ResultNoAgent = "no_agent"
	// ResultForbiddenAgent: on /agents/<a>/mcp, a token that does not match
	// agent a, or a static token of another agent.
	ResultForbiddenAgent = "forbidden_agent"
	// ResultUnavailable: the authorization server's keys or introspection
	// endpoint could not be reached and nothing cached could answer.
	ResultUnavailable = "unavailable"
)

// Method is how a Principal was authenticated.
type Method string

// Methods of authentication.
const (
	// MethodNone: the endpoint's agent needs no credential (it has no
	// tokens and listen.auth is not set; docs/agents.md#over-http, loopback setups).
	MethodNone Method = "none"
	// MethodStatic: one of the agent's configured tokens.
	MethodStatic Method = "static"
	// MethodOAuth: an access token of listen.auth's issuer.
	MethodOAuth Method = "oauth"
)

// Principal is who a request comes from. It never holds the token.
type Principal struct {
	// Agent is the configured agent to serve.
	Agent string
	// Method says how the request was authenticated.
	Method Method
	// TokenIndex is the index of the matching token in agents.<a>.tokens
	// (MethodStatic); -1 otherwise.
	TokenIndex int
	// Subject is the token's sub claim (MethodOAuth); "" otherwise.
	Subject string
	// ClientID is the client the token was issued to (azp or client_id),
	// when the token says (MethodOAuth).
	ClientID string
	// Scopes are the token's scopes (MethodOAuth).
	Scopes []string
	// Expiry is when the access token expires; zero for static tokens and
	// for introspected tokens without exp.
	Expiry time.Time
}

// Options are the optional collaborators of an Authenticator. The zero value
// is usable.
type Options struct {
	// BoundAddr is the address the listener actually bound (host:port). It
	// builds the default public URL (http://<addr>) when listen.public_url
	// is unset; "" means listen.addr.
	BoundAddr string
	// Client makes the requests to the authorization server: metadata
	// discovery, JWKS and introspection. nil means a client with a
	// fetchTimeout timeout.
	Client *http.Client
	// Metrics counts outcomes in mcp_proxy_auth_total; nil records nothing.
	Metrics *metrics.Metrics
	// Log receives warnings about the authorization server (unreachable
	// keys or introspection) and one debug line per refusal; never a token.
	Log zerolog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Authenticator authenticates the requests of the HTTP listener's MCP
// endpoints for one config. Build it with New.
type Authenticator struct {
	cfg          *config.Config
	order        []string // agents in config order
	defaultAgent string   // agent of the default endpoint; "" when none
	public       string   // public URL, no trailing slash
	publicPath   string   // path of the public URL ("" or "/prefix")
	path         string   // listen.path
	oauth        *verifier
	metrics      *metrics.Metrics
	log          zerolog.Logger
	// fixed are the Principals of requests without a token or with a
	// static one, by agent: made once, shared by every request.
	fixed map[string]fixedPrincipals
}

// fixedPrincipals are one agent's Principals that no token's claims
// change: MethodNone's, and MethodStatic's for each of its tokens.
type fixedPrincipals struct {
	none   *Principal
	static []*Principal // by token index
}

// fixedFor returns the fixed Principals of every agent of cfg (the
// implicit agent when there are none).
func fixedFor(cfg *config.Config) map[string]fixedPrincipals {
	out := map[string]fixedPrincipals{}
	add := func(name string, tokens int) {
		f := fixedPrincipals{none: &Principal{Agent: name, Method: MethodNone, TokenIndex: -1}}
		for i := range tokens {
			f.static = append(f.static, &Principal{Agent: name, Method: MethodStatic, TokenIndex: i})
		}
		out[name] = f
	}
	if !cfg.HasAgents() {
		add(config.ImplicitAgent, 0)
	}
	for name, ag := range cfg.Agents {
		add(name, len(ag.Tokens))
	}
	return out
}

// New returns the Authenticator of cfg, which must be valid (Parse or
// Validate passed). cfg must not be modified afterwards. New does no I/O:
// the authorization server is first asked when a token needs it.
func New(cfg *config.Config, opts Options) *Authenticator {
	a := &Authenticator{
		cfg:     cfg,
		order:   cfg.AgentsInOrder(),
		public:  cfg.Listen.PublicURLFor(opts.BoundAddr),
		path:    cfg.Listen.Path,
		metrics: opts.Metrics,
		log:     opts.Log,
		fixed:   fixedFor(cfg),
	}
	if i := strings.Index(a.public, "://"); i >= 0 {
		if j := strings.IndexByte(a.public[i+3:], '/'); j >= 0 {
			a.publicPath = a.public[i+3+j:]
		}
	}
	if cfg.HasAgents() {
		a.defaultAgent = cfg.DefaultAgent
	} else {
		a.defaultAgent = config.ImplicitAgent
	}
	if cfg.Listen.Auth != nil {
		a.oauth = newVerifier(cfg.Listen.Auth, opts)
	}
	return a
}

// Authenticate decides one request of an MCP endpoint. pathAgent is the <a>
// of /agents/<a>/mcp, or "" for the default endpoint (listen.path). It reads
// only r's Authorization header and context (a token check that must ask
// the authorization server is bounded by r's context and fetchTimeout), and
// does not modify r.
//
// Exactly one result is non-nil. The Principal may be shared with other
// requests (a request without a token or with a static one gets its
// agent's, made once; the cache of accepted tokens hands out its own):
// callers must not modify it. A Principal names the agent to serve: on
// the default endpoint it is default_agent for static tokens and requests
// without a credential, and the first agent in config order whose match
// rules hold for an access token. A Failure says what to answer; write it
// with Failure.Write. Every outcome but MethodNone and 404 is counted in
// mcp_proxy_auth_total.
func (a *Authenticator) Authenticate(r *http.Request, pathAgent string) (*Principal, *Failure) {
	agent := pathAgent
	if agent == "" {
		agent = a.defaultAgent
	}
	if agent != "" && a.agentConfig(agent) == nil || agent == "" && a.oauth == nil {
		return nil, a.unknownAgent(pathAgent)
	}
	tok, ok := bearerToken(r.Header.Get("Authorization"))
	if a.oauth == nil {
		return a.staticOnly(agent, tok, ok)
	}
	if !ok {
		return nil, a.fail(pathAgent, ResultMissing)
	}
	if owner, idx := a.staticOwner(tok, agent); owner == agent && agent != "" {
		a.count(agent, ResultOK)
		return a.fixed[agent].static[idx], nil
	} else if owner != "" {
		// A static token of another agent: refused here, and never sent to
		// the introspection endpoint.
		return nil, a.forbidden(pathAgent, ResultForbiddenAgent,
			"Forbidden: a static token serves only its own agent's endpoint")
	}
	// A token accepted at this endpoint before is taken from the cache;
	// gen is read before a full check, so that a key set fetched during
	// it leaves the entry stale instead of trusted with keys it was not
	// checked against.
	key, gen := verifiedKey(tok, pathAgent), a.oauth.keys.generation()
	if p := a.oauth.verified.get(key, a.oauth.now(), gen); p != nil {
		a.count(p.Agent, ResultOK)
		return p, nil
	}
	p, f := a.checkToken(r, pathAgent, tok)
	if f == nil {
		a.oauth.verified.put(key, p, a.oauth.now(), gen)
	}
	return p, f
}

// checkToken checks an access token in full for pathAgent's endpoint: its
// signature or introspection, claims and scopes, and the agent it matches.
func (a *Authenticator) checkToken(r *http.Request, pathAgent, tok string) (*Principal, *Failure) {
	agent := pathAgent
	if agent == "" {
		agent = a.defaultAgent
	}
	info, res := a.oauth.verify(r.Context(), tok, a.audiences(pathAgent))
	if res != "" {
		a.log.Debug().Str("agent", agent).Str("result", res).Msg("access token refused")
		return nil, a.fail(pathAgent, res)
	}
	if missing := a.oauth.missingScopes(info.scopes); len(missing) > 0 {
		return nil, a.fail(pathAgent, ResultInsufficientScope)
	}
	p := &Principal{Method: MethodOAuth, TokenIndex: -1, Subject: info.subject,
		ClientID: info.clientID, Scopes: info.scopes, Expiry: info.expiry}
	if pathAgent != "" {
		if !matches(a.agentConfig(pathAgent).Match, info.claims) {
			return nil, a.forbidden(pathAgent, ResultForbiddenAgent,
				"Forbidden: the token's claims do not match agent "+strconv.Quote(pathAgent))
		}
		p.Agent = pathAgent
	} else {
		for _, name := range a.order {
			if matches(a.agentConfig(name).Match, info.claims) {
				p.Agent = name
				break
			}
		}
		if p.Agent == "" {
			return nil, a.forbidden("", ResultNoAgent, "Forbidden: the token's claims match no agent")
		}
	}
	a.count(p.Agent, ResultOK)
	return p, nil
}

// staticOnly applies docs/agents.md#over-http as it stands without listen.auth.
func (a *Authenticator) staticOnly(agent, tok string, ok bool) (*Principal, *Failure) {
	tokens := a.agentConfig(agent).Tokens
	if len(tokens) == 0 {
		return a.fixed[agent].none, nil
	}
	if idx := matchStatic(tok, tokens); ok && idx >= 0 {
		a.count(agent, ResultOK)
		return a.fixed[agent].static[idx], nil
	}
	res := ResultInvalid
	if !ok {
		res = ResultMissing
	}
	a.count(agent, res)
	return nil, &Failure{
		Status:  http.StatusUnauthorized,
		Header:  http.Header{"Www-Authenticate": {`Bearer realm="mcp-proxy"`}},
		Message: "Unauthorized: a valid bearer token for agent " + strconv.Quote(agent) + " is required",
		Result:  res,
	}
}

// agentConfig returns the configured agent (the implicit one when there
// are no agents), or nil.
func (a *Authenticator) agentConfig(name string) *config.Agent {
	if !a.cfg.HasAgents() {
		if name == config.ImplicitAgent {
			return &config.Agent{Name: name}
		}
		return nil
	}
	return a.cfg.Agents[name]
}

// count records one outcome. agent is a configured name or "".
func (a *Authenticator) count(agent, result string) { a.metrics.Auth(agent, result) }

// unknownAgentText is the whole 404 body of /agents/<a>/mcp when <a> is no
// configured agent: a fixed text, since anyone may ask and the agents'
// names (and the path echoed back) are nothing an unauthenticated caller
// should learn.
const unknownAgentText = "Not Found: unknown agent"

// unknownAgent is the 404 of an endpoint without a configured agent. The
// default endpoint without default_agent lists the agents, as docs/agents.md#agents-bundles-and-policy
// asks (the operator chose to serve no default: the list is the way in);
// an agent path gets unknownAgentText and the detail goes to the debug
// log. It is not an authentication outcome and is not counted.
func (a *Authenticator) unknownAgent(pathAgent string) *Failure {
	if pathAgent == "" {
		msg := "unknown agent: no agent named and no default_agent set; agents: " + strings.Join(a.cfg.AgentNames(), ", ")
		return &Failure{Status: http.StatusNotFound, Header: http.Header{}, Message: msg}
	}
	agents := a.cfg.AgentNames()
	if !a.cfg.HasAgents() {
		agents = []string{config.ImplicitAgent}
	}
	a.log.Debug().Str("agent", pathAgent).Strs("agents", agents).Msg("request for the endpoint of an unknown agent")
	return &Failure{Status: http.StatusNotFound, Header: http.Header{}, Message: unknownAgentText}
}
