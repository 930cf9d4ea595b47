package integrity

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Kind is the family of a finding, the kind label of
// mcp_proxy_tool_findings_total.
type Kind string

// Finding kinds of the description scan.
const (
	KindInvisible        Kind = "invisible_characters"
	KindHiddenMarkup     Kind = "hidden_markup"
	KindModelInstruction Kind = "model_instruction"
	KindCredentialAccess Kind = "credential_access"
	KindToolManipulation Kind = "tool_manipulation"
	KindCrossServer      Kind = "cross_server_reference"
	KindLongDescription  Kind = "long_description"
	// KindUnreadable is a tool object the scan could not walk (nested
	// too deep, or not JSON): what cannot be read cannot be trusted.
	KindUnreadable Kind = "unreadable"
)

// Kinds counted by the findings metric that come from pinning, not from
// the scan.
const (
	KindDefinitionChanged Kind = "definition_changed"
	KindNewTool           Kind = "new_tool"
)

// Level is how serious a finding is. Under scan: quarantine a
// quarantine-level finding holds the tool; warn-level findings are only
// logged and counted in every mode.
type Level string

// Levels.
const (
	LevelWarn       Level = "warn"
	LevelQuarantine Level = "quarantine"
)

// maxDescriptionRunes is the limit of docs/security.md#tool-integrity: a longer description is a
// warn-level finding (it buries instructions where nobody reads).
const maxDescriptionRunes = 4000

// phraseRule is one data-driven detector: every pattern of all must match
// the normalized text (invisible characters removed, white space collapsed,
// case ignored); the excerpt is taken around the first pattern's match.
// The patterns run only when the lower-cased text contains one of hints,
// which every match needs: most descriptions contain none, and skipping the
// regular expressions makes the scan of a large catalog several times
// faster.
type phraseRule struct {
	rule  string
	kind  Kind
	level Level
	hints []string
	all   []string
	// strip: the strip step removes what this rule finds (hidden markup).
	strip bool
	// unless names rules, earlier in phraseRules, whose finding on the
	// same text makes this one's redundant (a warning that a
	// quarantine-level rule says more precisely).
	unless []string
}

// Building blocks of the patterns.
const (
	// sensitivePath matches files that hold credentials: SSH and cloud
	// keys, package registry and database passwords, shell history, and
	// the MCP hosts' own config files (which hold other servers' tokens).
	// ".env" counts only as a file name, not inside "process.env".
	sensitivePath = `(?:\.ssh\b|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|\.aws/(?:credentials|config)\b|` +
		`(?:^|[\s'"` + "`" + `(/~])\.(?:netrc|npmrc|pypirc|pgpass|git-credentials|gnupg|(?:bash|zsh|sh)_history|env)\b|` +
		`\.docker/config\.json|\.kube/config\b|\.config/gcloud\b|\.azure/|\bmcp\.json\b|claude_desktop_config\.json|` +
		`\.cursor/|/etc/(?:shadow|passwd|sudoers)\b)`
	// transfer matches an instruction to move data into a parameter of
	// the call, or out to an address.
	transfer = `\b(?:pass|send|include|put|insert|append|attach|upload|forward|post|provide|add|copy|paste|embed|concatenat|share|transmit|leak)\w*\b` +
		inSentence + `{0,80}?(?:\b(?:parameter|argument|param|field|sidenote|side note|notes?)\b|\bas\s+['"` + "`" + `]\w+['"` + "`" + `]|\bto\s+(?:https?://|[\w.+-]+@[\w-]+\.))`
	// secretNoun is a kind of secret a tool has no business asking for.
	secretNoun = `\b(?:private keys?|ssh keys?|api keys?|access tokens?|auth tokens?|secrets?|passwords?|credentials|session cookies|environment variables|env vars)\b`
	// theUser is "the user" as a whole phrase (not "the user's", not
	// "username").
	theUser = `\bthe\s+user(?:$|[\s.,;:!?)])`
	// inSentence is one character that does not end a sentence: a '.',
	// '!' or '?' counts only when white space or the end follows, so
	// "~/.ssh/id_rsa" and "e.g." stay inside.
	inSentence = `(?:[^.!?]|[.!?]\S)`
)

// phraseRules is the data of the phrase detectors. Each has a test with an
// attack it catches and a near miss it must not flag (detectors_test.go).
var phraseRules = []phraseRule{
	// Hidden markup: text a rendered view hides but the model reads.
	// An HTML comment hides what it holds; one that holds a word or
	// five ("<!-- comments -->", "<!-- TODO: paging -->",
	// "<!-- prettier-ignore -->") is how ordinary descriptions mention or
	// leave comments, so it is a warning, and a quarantine-level finding
	// needs room for an instruction (six words or more) or a directive
	// (see directive): "<!-- TODO: call the API -->", "<!-- DO NOT EDIT
	// -->" and "<!-- your changes here -->" are developers' notes.
	{rule: "html_comment", kind: KindHiddenMarkup, level: LevelQuarantine, hints: []string{"<!--"}, strip: true,
		all: []string{`<!--(?:\s*(?:` + commentWord + `\s+){5}` + commentWord + `|(?:(?:[^-]|-[^-])*?\s)?` + directive + `)`}},
	{rule: "html_comment_note", kind: KindHiddenMarkup, level: LevelWarn, hints: []string{"<!--"}, strip: true, unless: []string{"html_comment"},
		all: []string{`<!--\s*[^\s-]`}},
	{rule: "instruction_tag", kind: KindHiddenMarkup, level: LevelQuarantine, hints: []string{"<"}, strip: true,
		all: []string{`<\s*/?\s*` + instructionTagNames + `\b[^<>]*>`}},
	{rule: "markdown_comment", kind: KindHiddenMarkup, level: LevelQuarantine, hints: []string{"]:"}, strip: true,
		all: []string{`(?:^|\s)\[(?://|comment|_)\]:\s*(?:#|<>)\s*[("']`}},

	// Instructions aimed at the model: ignore what it was told, keep the
	// person in the dark.
	{rule: "override_instructions", kind: KindModelInstruction, level: LevelQuarantine, hints: overrideHints,
		all: []string{overrideVerb + `\s+(?:all\s+|any\s+|every\s+)?(?:of\s+)?(?:the\s+|your\s+|these\s+|those\s+|my\s+|its\s+)?` +
			`(?:previous|prior|above|earlier|preceding|former|original|system|safety|security|other|existing)\s+` +
			`(?:instructions?|prompts?|rules|guidelines|directives|messages|constraints|policies|guardrails)\b`}},
	// "Disregard the above and ...", "Forget everything you were told":
	// the earlier text as the object, without naming it instructions. A
	// word that follows "the above" as a noun ("ignore the above limit")
	// is a near miss.
	{rule: "override_context", kind: KindModelInstruction, level: LevelQuarantine, hints: overrideHints,
		all: []string{contextVerb + `\s+(?:(?:(?:all|everything|anything)\s+(?:of\s+)?(?:the\s+|` + earlierClause + `)?` +
			`(?:above|foregoing|preceding|previous(?:ly)?|prior|before|earlier))|(?:(?:the\s+|what\s+` + earlierVerb + `)?(?:above|foregoing|preceding)))` +
			`(?:\s+(?:text|content|context|conversation|messages?|said|written|stated))?\s*(?:$|[.,;:!]|\band\b|\bthen\b|\binstead\b|—|-)`}},
	{rule: "override_told", kind: KindModelInstruction, level: LevelQuarantine, hints: overrideHints,
		all: []string{contextVerb + `\s+(?:everything|anything|all|what(?:ever)?)\s+(?:that\s+)?(?:you\s*(?:were|are|have\s+been|'ve\s+been|'re)\s+` +
			`(?:told|given|instructed|taught|asked)|you\s+(?:know|learned|read)\s+(?:before|so\s+far|until\s+now)|(?:the\s+)?(?:system|developer|user)\s+(?:said|wrote|asked))`}},
	{rule: "override_yours", kind: KindModelInstruction, level: LevelQuarantine, hints: overrideHints,
		all: []string{overrideVerb + `\s+(?:all\s+)?(?:of\s+)?your\s+(?:(?:original|previous|prior|current|safety|system)\s+)?` +
			`(?:instructions?|guidelines|rules|programming|training|system\s+prompt|prompt|directives|guardrails|restrictions|policies)\b`}},
	{rule: "new_instructions", kind: KindModelInstruction, level: LevelQuarantine, hints: []string{"instruction", "task", "role", "objective", "goal", "purpose", "directive", "now"},
		all: []string{`(?:\byour\s+(?:new|real|actual|true|updated)\s+(?:instructions?|task|role|objective|goal|purpose|directives?)\s*(?:is|are|:|now)|` +
			`\bnew\s+(?:system\s+)?instructions?\s*:|` +
			`\bfrom\s+now\s+on,?\s+(?:ignore|disregard|forget|always\s+respond|respond\s+only|act\s+as|behave\s+as|obey|you\s+(?:are|will|must|shall)\s+(?:act|behave|respond|ignore|obey|follow|pretend))|` +
			`\byou\s+are\s+now\s+(?:in\s+)?(?:a\s+|an\s+)?(?:developer|dev|admin|god|jailbreak|jailbroken|dan|unrestricted|unfiltered|root)\b)`}},
	{rule: "decode_and_follow", kind: KindModelInstruction, level: LevelQuarantine, hints: []string{"decode"},
		all: []string{`\bdecode\b` + inSentence + `{0,40}?\b(?:and|then)\s+(?:follow|execute|obey|carry\s+out|act\s+on)` +
			`(?:\s+(?:it|them|this|that|these|the\s+(?:result|instructions?|text|contents?|output|decoded\s+\w+)))?\s*(?:$|[.:;,!])`}},
	{rule: "chat_template_tokens", kind: KindModelInstruction, level: LevelQuarantine, hints: []string{"<|", "[inst]", "[/inst]", "<<sys>>", "<</sys>>"},
		all: []string{`<\|\s*(?:im_start|im_end|system|user|assistant|endoftext|eot_id|start_header_id|end_header_id)\s*\|>|\[/?inst\]|<</?sys>>`}},
	{rule: "hide_from_user", kind: KindModelInstruction, level: LevelQuarantine, hints: []string{"user"},
		all: []string{`\b(?:do not|don't|dont|never|must not|should not|shouldn't)\s+(?:tell|inform|mention|notify|reveal|disclose|alert|show|explain|report|let)\b` +
			`(?:\s+\S+){0,5}?\s+(?:to\s+|with\s+)?` + theUser}},
	{rule: "conceal_from_user", kind: KindModelInstruction, level: LevelQuarantine, hints: []string{"user"},
		all: []string{`\b(?:hide|conceal|keep)\s+(?:this|it|that|these|them|everything|anything|the\s+(?:instructions?|request|steps?|files?|contents?))\b` +
			`(?:\s+\S+){0,3}?\s+from\s+` + theUser}},
	{rule: "user_unaware", kind: KindModelInstruction, level: LevelQuarantine, hints: []string{"user", "without"},
		all: []string{`(?:\buser\s+(?:must|should|does|need|needs|will)\s*(?:not|n't|never)\s+(?:know|see|notice|find out|be\s+(?:told|informed|aware|notified|shown))\b|` +
			`\bwithout\s+(?:the\s+user|them)\s+(?:knowing|noticing|seeing|being\s+(?:told|informed|aware)))`}},
	{rule: "covert_action", kind: KindModelInstruction, level: LevelQuarantine, hints: []string{"secretly", "covertly", "quietly", "silently", "discreetly", "invisibly"},
		all: []string{`\b(?:secretly|covertly|quietly|silently|discreetly|invisibly)\s+(?:send|read|include|pass|forward|upload|copy|call|invoke|run|execute|exfiltrate|collect|add|append|attach|post|share|transmit)\b`}},
	{rule: "instruction_label", kind: KindModelInstruction, level: LevelWarn, hints: []string{"["},
		all: []string{`\[\s*(?:(?-i:IMPORTANT|SYSTEM|INSTRUCTIONS?|ADMIN|SECRET|HIDDEN)\s*[:\]]|(?:important|system|instructions?|admin|secret|hidden|note to (?:the )?(?:assistant|ai|model))\s*:)`}},

	// Markdown and HTML images are fetched when the client renders them,
	// links when the person clicks: a URL that the model is to fill in
	// with conversation data carries it to whoever runs the host. See
	// urlDataPlaceholder and urlQueryData for what counts as data; a
	// fragment (after '#') is never sent, so the URL ends there. Ordinary
	// documentation links (paths such as /actions/secrets or
	// /channels/{channel_id}/messages, queries such as ?q=session) have
	// neither. An image is fetched without a click, so for images any
	// placeholder (urlPlaceholder) and a query parameter named after
	// conversation data (?session=1) are enough.
	{rule: "markdown_image_exfiltration", kind: KindModelInstruction, level: LevelQuarantine, hints: []string{"![", "<img"},
		all: []string{`(?:!\[[^\]]*\]\(\s*<?|<img\b[^>]*\bsrc\s*=\s*["']?)` + urlStart + `[^\s)"'>#]*?(?:` + urlPlaceholder + `|` +
			urlDataPlaceholder + `|` + urlQueryData + `|` + urlDataParam + `)`}},
	// One image is one finding: "![x](...)" holds a link's "](" too.
	{rule: "markdown_link_exfiltration", kind: KindModelInstruction, level: LevelQuarantine, hints: []string{"]("},
		unless: []string{"markdown_image_exfiltration"},
		all:    []string{`\]\(\s*<?` + urlStart + `[^\s)#]*?(?:` + urlDataPlaceholder + `|` + urlQueryData + `)`}},
	{rule: "markdown_link_placeholder", kind: KindModelInstruction, level: LevelWarn, hints: []string{"]("},
		unless: []string{"markdown_image_exfiltration", "markdown_link_exfiltration"}, all: []string{`\]\(\s*<?` + urlStart + `[^\s)#]*?` + urlPlaceholder}},

	// Credentials and dotfiles.
	{rule: "credential_exfiltration", kind: KindCredentialAccess, level: LevelQuarantine, hints: sensitivePathHints,
		all: []string{sensitivePath, transfer}},
	{rule: "credential_read", kind: KindCredentialAccess, level: LevelQuarantine, hints: sensitivePathHints,
		all: []string{`\b(?:read|open|cat|load|fetch|retrieve|get|obtain|collect|extract)\b` + inSentence + `{0,40}?` + sensitivePath,
			`\b(?:before|first|must|always|otherwise)\b`}},
	{rule: "secret_exfiltration", kind: KindCredentialAccess, level: LevelQuarantine, hints: []string{"key", "token", "secret", "password", "credential", "cookie", "environment variable", "env var"},
		all: []string{`\b(?:read|get|fetch|collect|extract|gather|find|dump|list|copy)\b` + inSentence + `{0,40}?` + secretNoun, transfer}},
	{rule: "credential_path", kind: KindCredentialAccess, level: LevelWarn, hints: sensitivePathHints,
		all: []string{sensitivePath}},

	// Calling or changing other tools.
	{rule: "shadowing_preamble", kind: KindToolManipulation, level: LevelQuarantine, hints: []string{"tool is"},
		all: []string{`\bwhen\s+(?:this|the\s+\S+)\s+tool\s+is\s+(?:available|present|loaded|installed|enabled|active|connected)\b`}},
	{rule: "redirect_data", kind: KindToolManipulation, level: LevelQuarantine, hints: []string{"send", "forward", "redirect", "bcc", "cc", "copy", "route", "mirror"},
		all: []string{`\b(?:send|forward|redirect|bcc|cc|copy|route|mirror)\s+(?:all|every|any|each)\s+(?:\S+\s+){0,2}?` +
			`(?:emails?|e-mails?|messages?|mails?|requests?|data|results?|outputs?|files?|transactions?|payments?|transfers?|calls?|responses?)\s+(?:to|through|via)\b`}},
	{rule: "all_tools_must", kind: KindToolManipulation, level: LevelQuarantine, hints: []string{"must", "should", "shall", "need to", "have to"},
		all: []string{`\b(?:all|every|any)\s+(?:other\s+)?tools?\s+(?:must|should|shall|need to|have to)\b`}},
	{rule: "named_tool_must", kind: KindToolManipulation, level: LevelQuarantine, hints: []string{"must", "should", "shall"},
		all: []string{`\bthe\s+[\w.-]+\s+tool\s+(?:must|should|shall)\s+(?:always\s+|also\s+|now\s+|only\s+)?` +
			`(?:send|forward|include|add|bcc|cc|redirect|route|be\s+(?:called|invoked)\s+(?:with|first|before))\b`}},
	{rule: "change_other_tools", kind: KindToolManipulation, level: LevelQuarantine, hints: []string{"change", "modify", "alter", "override", "redefine", "replace", "update", "rewrite", "hijack"},
		all: []string{`\b(?:change|modify|alter|override|redefine|replace|update|rewrite|hijack)\s+(?:` +
			`(?:the\s+)?(?:behaviou?r|descriptions?|parameters?|arguments?|inputs?|recipients?|destination|results?|outputs?)\s+of\s+(?:the\s+|all\s+|any\s+|other\s+|every\s+|each\s+)(?:\S+\s+){0,2}?(?:tools?|functions?)|` +
			`(?:all\s+|any\s+|the\s+)?other\s+tools?)\b`}},
	{rule: "disable_other_tools", kind: KindToolManipulation, level: LevelQuarantine, hints: []string{"other", "another", "different", "alternative"},
		all: []string{`\b(?:do not|don't|never)\s+(?:use|call|invoke|run|trust)\s+(?:any\s+)?(?:other|another|different|alternative)\s+(?:\S+\s+)?(?:tools?|functions?|servers?)\b`}},
	{rule: "call_me_first", kind: KindToolManipulation, level: LevelWarn, hints: []string{"this tool first", "this tool before"},
		all: []string{`\b(?:always|must|should always)\s+(?:call|invoke|use|run)\s+this\s+tool\s+(?:first|before\s+(?:any|all|every|using|calling|invoking|running|other))`}},
	{rule: "call_order", kind: KindToolManipulation, level: LevelWarn, hints: []string{"before using", "before calling", "before invoking", "before running", "before executing", "prior to"},
		all: []string{`\b(?:before|prior\s+to)\s+(?:using|calling|invoking|running|executing)\s+(?:this|any|each|every)\s+(?:other\s+)?(?:tool|function)s?\b`}},
	{rule: "instead_of_tool", kind: KindToolManipulation, level: LevelWarn, hints: []string{"instead of", "rather than"},
		all: []string{`\b(?:instead\s+of|rather\s+than)\s+(?:using|calling|invoking)\s+(?:the\s+|any\s+)?[\w.-]+\s+tool`}},
}

// overrideVerb is a verb that sets aside what the model was told.
const overrideVerb = `\b(?:ignore|disregard|forget|override|bypass|skip|discard|abandon|set\s+aside|pay\s+no\s+attention\s+to|` +
	`(?:do\s+not|don't|dont|stop|no\s+longer)\s+(?:follow|obey)(?:ing)?)`

// contextVerb is the part of overrideVerb that sets aside text without
// naming it instructions ("disregard the above"): "skip", "bypass" and
// "override" the previous page, step or version are ordinary.
const contextVerb = `\b(?:ignore|disregard|forget|discard|abandon|set\s+aside|pay\s+no\s+attention\s+to|` +
	`(?:do\s+not|don't|dont|stop|no\s+longer)\s+(?:follow|obey)(?:ing)?)`

// overrideHints are substrings every overrideVerb match contains.
var overrideHints = []string{"ignore", "disregard", "forget", "override", "bypass", "skip", "discard", "abandon",
	"aside", "no attention", "follow", "obey"}

// Building blocks of the HTML comment rules: a word of a comment (no
// "--" inside), and a directive: words that address the model ("assistant:",
// "you must", "your new task", "system:"), tell it to set aside what it was
// told, to call a named tool ("call delete_all", "invoke fs.write"), to send
// or include conversation data or secrets, or to keep something from the
// person. A word alone ("call", "you", "system", "important", "do not")
// is not one: developers' notes use them all.
const (
	commentWord = `(?:[^\s-]|-[^\s-])+`
	directive   = `(?:(?:assistant|ai|model|llm|agent|claude|gpt|chatgpt|copilot)\s*[:,]|` +
		`(?:the\s+)?(?:assistant|ai|model|llm|agent)\s+(?:must|should|shall|will|needs?\s+to)\b|` +
		`(?:note|message)\s+(?:to|for)\s+(?:the\s+)?(?:assistant|ai|model|llm|agent)\b|` +
		`you(?:'re|\s+are|\s+must|\s+should|\s+shall|\s+will|\s+need\s+to|\s+have\s+to|\s+may\s+not|\s+now)\b|` +
		`your\s+(?:(?:new|real|actual|true)\s+)?(?:instructions?|task|job|role|goal|objective|orders|prompt)\b|` +
		`system(?:\s+(?:prompt|message|instructions?|override|note))?\s*:|system\s+(?:prompt|instructions?)\b|` +
		`(?:ignore|disregard|forget|override)\b|` +
		`(?:call|invoke|execute)\s+(?:the\s+)?[a-z][a-z0-9]*(?:[_.][a-z][a-z0-9]*)+|` +
		`(?:send|forward|upload|include|append|attach|post|leak|exfiltrate|copy|paste|pass)\s+(?:` + commentWord + `\s+){0,4}?` + urlDataWord + `\b|` +
		`(?:do\s+not|don't|never)\s+(?:tell|mention|reveal|show|inform|notify|let|alert)\b)`
)

// earlierClause and earlierVerb are "that came before", "what was said",
// "which was written": text before this one, as a relative clause.
const (
	earlierVerb   = `(?:was|is|came|comes|went|has\s+been|had\s+been|you\s+(?:read|saw|got))\s+(?:(?:said|written|stated|given|sent|shown)\s+)?`
	earlierClause = `(?:that|what|which)\s+` + earlierVerb
)

// Building blocks of the link rules.
//
// A placeholder is what the model is to replace: {name}, {{name}},
// ${name}, $NAME (capitals), <name>, [name], %s, and a run of capitals
// joined by '_' that asks to be replaced (YOUR_NAME, INSERT_TEXT,
// NAME_HERE). It carries data (urlDataPlaceholder) when its name ends in
// a data word (urlDataWord, possibly plural, after any qualifiers and
// before any filler such as _here, _log, _text): {conversation},
// {{messages}}, {{ .Messages }}, {{ conversation | urlencode }},
// {previous_messages}, <chat history>, $SUMMARY,
// CONVERSATION_HERE, CHAT_LOG, YOUR_API_KEY. A name that ends in
// something else names a resource, not its content: {conversation_id},
// {message.id}, {secret_name}, {name=spaces/*/messages/*}.
const (
	urlStart = `(?:[a-z][a-z0-9+.-]*:)?//`
	// urlDataWord is conversation data and secrets.
	urlDataWord = `(?:conversations?|chats?|histor(?:y|ies)|transcripts?|messages?|msgs|context|prompts?|memor(?:y|ies)|summary|summari[sz]ed?|` +
		`dialog(?:ue)?s?|previous|secrets?|passwords?|passwd|credentials?|api[_-]?keys?|tokens?|cookies?|sessions?)`
	// urlConversationWord is the conversation part of urlDataWord: a
	// query value such as ?data=chat_history names it.
	urlConversationWord = `(?:conversations?|chats?|chat[_-]?logs?|histor(?:y|ies)|transcripts?|messages?|context|prompts?|memor(?:y|ies)|summary|dialog(?:ue)?s?)`
	// urlFiller is what may follow the data word in a placeholder's name.
	urlFiller          = `(?:here|so[_\s-]?far|log|logs|text|content|contents|data|body|dump|full|all|json|b64|base64|encoded|raw)`
	urlPlaceholder     = `(?:\{[^{}\s)]*\}|\$\{[^}\s)]*\}|\$(?-i:[A-Z][A-Z0-9_]{2,})|%s|<[^<>\s)]+>|\[[^\]\s)]+\]|` + urlCapsMarker + `)`
	urlCapsMarker      = `(?-i:\b(?:YOUR|INSERT|PUT|ADD|ENTER)(?:_[A-Z0-9]+)+\b|\b(?:[A-Z0-9]+_)+(?:HERE|PLACEHOLDER)\b)`
	urlPlaceholderName = `(?:[a-z0-9]+[_.\s-]+)*?` + urlDataWord + `(?:[_.\s-]+` + urlFiller + `)*`
	urlDataPlaceholder = `(?:\{\{?\s*[.$]?` + urlPlaceholderName + `\s*(?:\|[^{}]*)?\}|<\s*` + urlPlaceholderName + `\s*>|\[\s*` + urlPlaceholderName + `\s*\]|` + urlCapsData + `)`
	// urlCapsData is a placeholder in capitals that carries data:
	// $SUMMARY, ${CHAT_HISTORY}, CONVERSATION_HERE, CHAT_LOG, YOUR_API_KEY.
	// A single word (HISTORY.md, SESSION) is not one.
	urlCapsData = `(?-i:\$\{?(?:[A-Z0-9]+_)*` + urlCapsDataWord + `(?:_` + urlCapsFiller + `)*\b|\b(?:[A-Z0-9]+_)*` + urlCapsDataWord + `(?:_` + urlCapsFiller + `)+\b|` +
		`\b(?:[A-Z0-9]+_)+` + urlCapsDataWord + `(?:_` + urlCapsFiller + `)*\b)`
	// urlCapsDataWord and urlCapsFiller are urlDataWord and urlFiller in
	// capitals.
	urlCapsDataWord = `(?-i:CONVERSATIONS?|CHATS?|HISTOR(?:Y|IES)|TRANSCRIPTS?|MESSAGES?|MSGS|CONTEXT|PROMPTS?|MEMOR(?:Y|IES)|SUMMARY|SUMMARI[SZ]ED?|` +
		`DIALOG(?:UE)?S?|PREVIOUS|SECRETS?|PASSWORDS?|PASSWD|CREDENTIALS?|API_?KEYS?|TOKENS?|COOKIES?|SESSIONS?)`
	urlCapsFiller = `(?-i:HERE|SO_FAR|LOGS?|TEXT|CONTENTS?|DATA|BODY|DUMP|FULL|ALL|JSON|B64|BASE64|ENCODED|RAW)`
	// urlQueryData is a whole query value that names conversation data:
	// words joined by '_' or '-' whose last is a conversation word, but
	// for filler (?data=chat_history, ?d=full-transcript, ?log=CHAT_LOG),
	// or a data word in capitals (?d=CONVERSATION). One lower-case word
	// (?q=session, ?action=history, ?prompt=consent) is an ordinary
	// query, and so is a name that ends in something else
	// (?sort=message_count).
	urlQueryData = `[?&;][^=&#\s)]*=(?:(?:[a-z0-9]+[_-])+` + urlConversationWord + `(?:[_-]` + urlFiller + `)*|` +
		urlConversationWord + `(?:[_-]` + urlFiller + `)+|` + urlCapsDataWord + `)(?:$|[&;#)\s"'>])`
	// urlDataParam is a query parameter named after conversation data
	// (?session=1, ?chat_history=): enough for an image.
	urlDataParam = `[?&;](?:[a-z0-9]+[_-])*` + urlDataWord + `(?:[_-][a-z0-9]+)*=`
)

// instructionTagNames are the pseudo-tags that mark an instruction block
// for the model (<IMPORTANT>, <SYSTEM>, ...).
const instructionTagNames = `(?:important|system|instructions?|secret|hidden|admin|assistant|critical|urgent|override|sys|inst|system[-_\s]*(?:prompt|reminder|message))`

// sensitivePathHints are substrings every sensitivePath match contains.
var sensitivePathHints = []string{".ssh", "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", ".aws/", ".netrc", ".npmrc", ".pypirc",
	".pgpass", ".git-credentials", ".gnupg", "_history", ".env", ".docker/", ".kube/", ".config/gcloud", ".azure/", "mcp.json",
	"claude_desktop_config.json", ".cursor/", "/etc/"}

// compiledRule is a phraseRule with its hints as a set of indexes into
// allHints and its patterns compiled on first use: a rule's patterns run
// only on a text that holds one of its hints, and compiling every rule's
// up front was a millisecond and a half of each start.
type compiledRule struct {
	phraseRule
	res func() []*regexp.Regexp
	// needs are the clauses every match of the patterns needs
	// (needLiterals), derived on first use too.
	needs    func() [][]string
	hintMask hintSet
	// unlessMask has bit i set when rules[i] is one of unless.
	unlessMask uint64
}

// rules are phraseRules compiled once; allHints are their hints without
// duplicates, so a text is searched once per distinct hint.
var rules, allHints = compileRules(phraseRules)

func compileRules(src []phraseRule) ([]compiledRule, []string) {
	if len(src) > 64 {
		panic("integrity: more than 64 phrase rules")
	}
	out := make([]compiledRule, len(src))
	var hints []string
	index := map[string]int{}
	for i, r := range src {
		out[i].phraseRule = r
		for _, u := range r.unless {
			j := slices.IndexFunc(src[:i], func(x phraseRule) bool { return x.rule == u })
			if j < 0 {
				panic("integrity: rule " + r.rule + ": unless names no earlier rule " + strconv.Quote(u))
			}
			out[i].unlessMask |= 1 << j
		}
		out[i].res = sync.OnceValue(func() []*regexp.Regexp {
			res := make([]*regexp.Regexp, len(r.all))
			for j, p := range r.all {
				res[j] = regexp.MustCompile(`(?i)` + p)
			}
			return res
		})
		out[i].needs = sync.OnceValue(func() [][]string { return needLiterals(r.all, r.hints) })
		for _, h := range r.hints {
			j, ok := index[h]
			if !ok {
				if !validHint(h) {
					panic("integrity: hint " + strconv.Quote(h) + " is not lower-case ASCII")
				}
				j = len(hints)
				index[h] = j
				hints = append(hints, h)
			}
			out[i].hintMask.add(j)
		}
	}
	return out, hints
}

// validHint reports whether h is a hint findHints can search: not empty,
// printable ASCII without capitals (ASCII case folding is then the
// lower-casing of the text's ASCII letters).
func validHint(h string) bool {
	for i := 0; i < len(h); i++ {
		if c := h[i]; c < 0x20 || c >= 0x7F || c >= 'A' && c <= 'Z' {
			return false
		}
	}
	return h != ""
}

// maxHints is how many distinct hints a hintSet holds.
const maxHints = 128

// hintSet is which of allHints a text contains: bit i is allHints[i].
type hintSet [maxHints / 64]uint64

func (h *hintSet) add(i int) {
	if i >= maxHints {
		panic("integrity: more than " + strconv.Itoa(maxHints) + " distinct hints")
	}
	h[i/64] |= 1 << (i % 64)
}

// has reports whether the text contains allHints[i].
func (h *hintSet) has(i int) bool { return h[i/64]&(1<<(i%64)) != 0 }

// anyOf reports whether the text contains one of the hints of m.
func (h *hintSet) anyOf(m *hintSet) bool {
	for i := range h {
		if h[i]&m[i] != 0 {
			return true
		}
	}
	return false
}

// hintRef is one hint of allHints and its index there.
type hintRef struct {
	text  string
	index int
}

// hintIndex is allHints arranged for findHints.
type hintIndex struct {
	// pairs has bit a<<8|b set when a hint of two or more bytes begins
	// with the bytes a, b: most positions of a text are rejected by one
	// look-up here.
	pairs [1 << 16 / 64]uint64
	// byFirst lists, for each byte, the hints of two or more bytes that
	// begin with it.
	byFirst [256][]hintRef
	// singles are the one-byte hints.
	singles []hintRef
}

var hintTable = indexHints(allHints)

func indexHints(all []string) *hintIndex {
	x := &hintIndex{}
	for i, h := range all {
		if len(h) == 1 {
			x.singles = append(x.singles, hintRef{h, i})
			continue
		}
		p := uint16(h[0])<<8 | uint16(h[1])
		x.pairs[p/64] |= 1 << (p % 64)
		x.byFirst[h[0]] = append(x.byFirst[h[0]], hintRef{h, i})
	}
	return x
}

// asciiLower maps 'A'-'Z' to 'a'-'z' and every other byte to itself.
var asciiLower = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
		if i >= 'A' && i <= 'Z' {
			t[i] += 'a' - 'A'
		}
	}
	return t
}()

// findHints finds every hint in strings.ToLower(norm) in one pass, and
// reports whether norm is ASCII. An ASCII text is compared with its
// letters folded on the fly instead of being copied lower-cased first; a
// text with other bytes is lower-cased with strings.ToLower, since
// Unicode lower-casing can change bytes and lengths (the Kelvin sign
// becomes 'k').
func findHints(norm string) (found hintSet, ascii bool) {
	found, ascii = hintTable.search(norm)
	if !ascii {
		found, _ = hintTable.search(strings.ToLower(norm))
	}
	return found, ascii
}

// search finds the hints in s, its ASCII letters folded to lower case,
// and reports whether s is ASCII.
func (x *hintIndex) search(s string) (found hintSet, ascii bool) {
	for _, h := range x.singles {
		c := h.text[0]
		if strings.IndexByte(s, c) >= 0 || c >= 'a' && c <= 'z' && strings.IndexByte(s, c-('a'-'A')) >= 0 {
			found.add(h.index)
		}
	}
	if s == "" {
		return found, true
	}
	high := s[0]
	prev := asciiLower[s[0]]
	for i := 1; i < len(s); i++ {
		high |= s[i]
		c := asciiLower[s[i]]
		p := uint16(prev)<<8 | uint16(c)
		prev = c
		if x.pairs[p/64]&(1<<(p%64)) == 0 {
			continue
		}
		for _, h := range x.byFirst[p>>8] {
			if h.text[1] == c && !found.has(h.index) && hasPrefixFolded(s[i-1:], h.text) {
				found.add(h.index)
			}
		}
	}
	return found, high < 0x80
}

// hasPrefixFolded is strings.HasPrefix(s with its ASCII letters folded
// to lower case, prefix).
func hasPrefixFolded(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		if asciiLower[s[i]] != prefix[i] {
			return false
		}
	}
	return true
}

// Strip patterns: what scan: strip removes besides invisible characters.
var (
	htmlCommentRe     = regexp.MustCompile(`(?s)<!--.*?(?:-->|$)`)
	openInstructionRe = regexp.MustCompile(`(?i)<\s*(` + instructionTagNames + `)\b[^<>]*>`)
	anyInstructionRe  = regexp.MustCompile(`(?i)<\s*/?\s*` + instructionTagNames + `\b[^<>]*>`)
	markdownCommentRe = regexp.MustCompile(`(?i)(^|\s)\[(?://|comment|_)\]:\s*(?:#|<>)\s*[("'][^\n]*`)
)

// stripMarkup removes HTML comments, instruction blocks (an opening tag to
// its closing tag, or to the end of the text when it is never closed),
// stray instruction tags and markdown comments (to the end of their line).
func stripMarkup(s string) string {
	s = htmlCommentRe.ReplaceAllString(s, "")
	for {
		loc := openInstructionRe.FindStringSubmatchIndex(s)
		if loc == nil {
			break
		}
		name := strings.ToLower(strings.Join(strings.Fields(s[loc[2]:loc[3]]), " "))
		end := len(s)
		closeRe := regexp.MustCompile(`(?i)<\s*/\s*` + regexp.QuoteMeta(name) + `\s*>`)
		if c := closeRe.FindStringIndex(s[loc[1]:]); c != nil {
			end = loc[1] + c[1]
		}
		s = s[:loc[0]] + s[end:]
	}
	s = anyInstructionRe.ReplaceAllString(s, "")
	return markdownCommentRe.ReplaceAllString(s, "${1}")
}
