package status

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// browser is a test client that behaves like one for the page: it keeps
// cookies, does not follow redirects by itself (tests look at each
// answer), and submits the page's forms with their hidden fields. It does
// what the page's script does with the action key: it keeps the key of a
// sign-in redirect's fragment (/#act=K) as the tab's sessionStorage does,
// puts it in the forms' act fields, shows the elements of class act and
// hides those of class no-act; signing out forgets it.
type browser struct {
	t    *testing.T
	base string
	hc   *http.Client
	act  string // the tab's sessionStorage
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{t: t, base: base, hc: &http.Client{Jar: jar,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// answer is one response: status, headers, body and its parsed document.
type answer struct {
	code   int
	header http.Header
	body   string
	doc    *html.Node
}

func (b *browser) do(req *http.Request) answer {
	b.t.Helper()
	resp, err := b.hc.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	doc, err := html.Parse(strings.NewReader(string(body)))
	if err != nil {
		b.t.Fatal(err)
	}
	if k, ok := strings.CutPrefix(resp.Header.Get("Location"), "/"+actionFragment); ok {
		b.act = k
	}
	if req.URL.Path == pathSignOut && resp.StatusCode == http.StatusSeeOther {
		b.act = ""
	}
	if b.act != "" {
		runScript(doc, b.act)
	}
	return answer{code: resp.StatusCode, header: resp.Header, body: string(body), doc: doc}
}

// runScript does to doc what the page's script does with the action key.
func runScript(doc *html.Node, key string) {
	hasClass := func(n *html.Node, c string) bool { return slices.Contains(strings.Fields(attr(n, "class")), c) }
	for _, n := range findAll(doc, func(n *html.Node) bool { return n.Data == "input" && attr(n, "name") == actionField }) {
		setAttr(n, "value", key)
	}
	for _, n := range findAll(doc, func(n *html.Node) bool { return hasClass(n, "act") }) {
		n.Attr = slices.DeleteFunc(n.Attr, func(a html.Attribute) bool { return a.Key == "hidden" })
	}
	for _, n := range findAll(doc, func(n *html.Node) bool { return hasClass(n, "no-act") }) {
		setAttr(n, "hidden", "")
	}
}

func setAttr(n *html.Node, key, val string) {
	for i := range n.Attr {
		if n.Attr[i].Key == key {
			n.Attr[i].Val = val
			return
		}
	}
	n.Attr = append(n.Attr, html.Attribute{Key: key, Val: val})
}

func (b *browser) get(path string) answer {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodGet, b.base+path, nil)
	if err != nil {
		b.t.Fatal(err)
	}
	return b.do(req)
}

// post sends a form as the page's own forms are sent (same origin).
func (b *browser) post(path string, form url.Values, header map[string]string) answer {
	b.t.Helper()
	req, err := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", b.base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return b.do(req)
}

// submit sends the form of a whose action is action and whose fields
// include match (name: value), with extra fields set.
func (b *browser) submit(a answer, action string, match map[string]string, extra url.Values) answer {
	b.t.Helper()
	for _, f := range findAll(a.doc, func(n *html.Node) bool { return n.Data == "form" && attr(n, "action") == action }) {
		form := url.Values{}
		for _, in := range findAll(f, func(n *html.Node) bool { return n.Data == "input" }) {
			form.Set(attr(in, "name"), attr(in, "value"))
		}
		ok := true
		for k, v := range match {
			ok = ok && form.Get(k) == v
		}
		if !ok {
			continue
		}
		for k, vs := range extra {
			form[k] = vs
		}
		return b.post(action, form, nil)
	}
	b.t.Fatalf("no form %s with %v on the page:\n%s", action, match, a.body)
	return answer{}
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func isHidden(n *html.Node) bool {
	return slices.ContainsFunc(n.Attr, func(a html.Attribute) bool { return a.Key == "hidden" })
}

func findAll(root *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && match(n) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(root)
	return out
}

// text is what a person reads in the element with id (white space
// collapsed); "" when there is none.
func (a answer) text(id string) string {
	els := findAll(a.doc, func(n *html.Node) bool { return attr(n, "id") == id })
	if len(els) == 0 {
		return ""
	}
	return textOf(els[0])
}

func textOf(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data + " ")
		}
		if n.Type == html.ElementNode && (n.Data == "script" || n.Data == "style" || isHidden(n)) {
			return
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}

// buttons lists the labels of the page's visible buttons (their
// accessible names).
func (a answer) buttons() []string {
	var out []string
	for _, n := range findAll(a.doc, func(n *html.Node) bool { return n.Data == "button" && visible(n) }) {
		label := attr(n, "aria-label")
		if label == "" {
			label = textOf(n)
		}
		out = append(out, label)
	}
	return out
}

// visible reports whether neither n nor an ancestor is hidden.
func visible(n *html.Node) bool {
	for ; n != nil; n = n.Parent {
		if n.Type == html.ElementNode && isHidden(n) {
			return false
		}
	}
	return true
}

// toPageWithKey reports whether a sign-in answer's Location is the page
// with the action key in its fragment.
func toPageWithKey(h http.Header) bool {
	k, ok := strings.CutPrefix(h.Get("Location"), "/"+actionFragment)
	return ok && len(k) == 43
}

// parseAnswer is the answer of a recorded response.
func parseAnswer(t *testing.T, rec *httptest.ResponseRecorder) answer {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatal(err)
	}
	return answer{code: rec.Code, header: rec.Header(), body: rec.Body.String(), doc: doc}
}
