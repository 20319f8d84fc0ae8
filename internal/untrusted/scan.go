package untrusted

import "fmt"

// Check refuses YAML (or JSON, which is YAML) over MaxBytes, nested deeper than MaxDepth or
// holding more than MaxNodes values, naming where the limit was crossed. It reads the bytes
// once and allocates nothing, so it is safe on any input; a parser may then be given what
// passes. It errs high: where it cannot tell structure from text cheaply it counts structure,
// so a real input is refused only if it is within a few levels of a limit.
func Check(file string, data []byte) error {
	if len(data) > MaxBytes {
		return tooLarge(file, "YAML file", fmt.Sprintf("%d bytes", len(data)))
	}
	s := scanner{file: file, data: data, line: 1, col: 1, plainOwner: noPlain, blockOwner: noPlain}
	return s.run()
}

const (
	levelMap = iota
	levelSeq
)

// noPlain means no plain scalar is open at the end of the previous line.
const noPlain = -2

type level struct{ col, kind int }

// scanner is a cut-down YAML lexer: enough of the grammar (quotes, comments, block scalars,
// plain scalars and their continuation lines, flow and block collections) to count levels
// and values as the parser would, and no more.
type scanner struct {
	file      string
	data      []byte
	i         int
	line, col int // of data[i]; columns count characters, as the parser's do

	levels  [MaxDepth + 2]level // block collections open, by column
	n       int
	flow    int // flow collections open ([ {)
	nodes   int
	deepest int // most levels open at once, for tests

	nodeStart   bool // the next character may start a value
	firstOnLn   bool // no token yet on this line
	owner       int  // column of the key or "-" that owns the value being scanned; -1 at top
	plainOwner  int  // a plain scalar ended the previous line: its owner's column, else noPlain
	blockOwner  int  // in a block scalar (| >) whose owner is at this column, else noPlain
	propCol     int  // column where the properties (&anchor, !tag) of the next value began, or 0
	lastCol     int  // 0-based column of the last value counted
	blockIndent int  // indentation of the block scalar's content, -1 before its first line
	nest        bool // the next block entry opens a level whatever its column
}

func (s *scanner) eof() bool { return s.i >= len(s.data) }

func (s *scanner) peek(k int) byte {
	if s.i+k < len(s.data) {
		return s.data[s.i+k]
	}
	return 0
}

// adv moves one byte on, keeping line and column (UTF-8 continuation bytes take no column).
func (s *scanner) adv() {
	c := s.data[s.i]
	s.i++
	switch {
	case c == '\n':
		s.line, s.col = s.line+1, 1
	case c&0xC0 != 0x80:
		s.col++
	}
}

func (s *scanner) limit(line, col int, format string, args ...any) error {
	return &Error{File: s.file, Line: line, Column: col, kind: ErrLimit, Msg: fmt.Sprintf(format, args...)}
}

func (s *scanner) depthErr(line, col int) error {
	return s.limit(line, col, "nested more than %d levels deep (mappings and lists); a file may nest at most %d", MaxDepth, MaxDepth)
}

// value counts one value starting at line:col.
func (s *scanner) value(line, col int) error {
	s.nodes++
	s.lastCol = col - 1
	if s.nodes > MaxNodes {
		return s.limit(line, col, "more than %d values (scalars, mappings, lists); a file may hold at most %d", MaxNodes, MaxNodes)
	}
	return nil
}

func isBlank(c byte) bool  { return c == ' ' || c == '\t' }
func isBreakz(c byte) bool { return c == '\n' || c == '\r' || c == 0 }
func isSpacez(c byte) bool { return isBlank(c) || isBreakz(c) }
func isFlowInd(c byte) bool {
	return c == ',' || c == '[' || c == ']' || c == '{' || c == '}'
}

func (s *scanner) run() error {
	for !s.eof() {
		again, err := s.lineStart()
		if err != nil {
			return err
		}
		if again {
			continue
		}
		if err := s.rest(); err != nil {
			return err
		}
	}
	return nil
}

// lineStart handles indentation: block-scalar and plain-scalar continuation lines, document
// markers, and the block collections a less indented line closes.
func (s *scanner) lineStart() (again bool, err error) {
	s.firstOnLn = true
	start := s.i
	indent := 0
	for !s.eof() && s.data[s.i] == ' ' {
		s.adv()
		indent++
	}
	for !s.eof() && s.data[s.i] == '\t' { // tabs are not indentation, but may separate
		s.adv()
	}
	c := s.peek(0)
	blank := isBreakz(c)
	docMarker := s.i == start && (hasPrefix(s.data[s.i:], "---") || hasPrefix(s.data[s.i:], "...")) && isSpacez(s.peek(3))
	if s.blockOwner != noPlain {
		// Block scalar content: lines indented as its first line is (more than its owner).
		if s.blockIndent < 0 && !blank && indent > s.blockOwner {
			s.blockIndent = indent
		}
		if !docMarker && (blank || s.blockIndent >= 0 && indent >= s.blockIndent) {
			s.skipLine()
			return true, nil
		}
		s.blockOwner = noPlain
	}
	if s.flow > 0 {
		return false, nil // inside a flow collection lines carry no structure
	}
	if blank || c == '#' {
		s.skipLine()
		return true, nil
	}
	// Properties that end a line belong to the next line's value, however it is indented (the
	// parser attaches them even when less indented): nothing is closed then, and it counts deeper.
	pending := s.propCol > 0
	s.propCol = 0
	if s.plainOwner != noPlain && indent > s.plainOwner && !docMarker {
		// Continuation of a multi-line plain scalar: text, unless it holds ": " (then the
		// parser sees a key, so count one).
		s.nodeStart = false
		return false, s.plain(false, s.line, s.col)
	}
	s.plainOwner = noPlain
	if docMarker {
		s.n = 0 // a new document
		s.adv()
		s.adv()
		s.adv()
		s.nodeStart, s.owner = true, -1
		return false, nil
	}
	if indent == 0 && c == '%' { // a directive
		s.skipLine()
		return true, nil
	}
	if c == ':' && isSpacez(s.peek(1)) {
		pending = true // the parser takes the value before as this ":"'s key, wherever it stood
	}
	s.nest = pending
	for !pending && s.n > 0 && s.levels[s.n-1].col > indent {
		s.n--
	}
	s.nodeStart, s.owner = true, -1
	if s.n > 0 {
		s.owner = s.levels[s.n-1].col
	}
	return false, nil
}

func hasPrefix(b []byte, p string) bool { return len(b) >= len(p) && string(b[:len(p)]) == p }

func (s *scanner) skipLine() {
	for !s.eof() && s.data[s.i] != '\n' {
		s.adv()
	}
	if !s.eof() {
		s.adv()
	}
}

// structural records a block collection entry (a "-", "?" or key) at column col.
func (s *scanner) structural(kind, col, line, ccol int) error {
	if s.nest {
		s.nest = false // under properties, every entry is a new level
	} else if s.n > 0 {
		top := s.levels[s.n-1]
		switch {
		case top.col > col: // only on a line that did not pop to it, which is an error; count it
		case top.col == col && top.kind == kind:
			return nil
		case top.col == col && kind == levelMap && s.n > 1 && s.levels[s.n-2].col == col:
			s.n-- // a key closes the list written at its own indentation
			return nil
		case top.col == col && kind == levelMap:
		case top.col == col: // a list at the indentation of the key it belongs to
		}
	}
	if s.n+s.flow >= MaxDepth {
		return s.depthErr(line, ccol)
	}
	s.levels[s.n] = level{col: col, kind: kind}
	s.n++
	s.deepest = max(s.deepest, s.n+s.flow)
	return s.value(line, ccol)
}

// rest scans the remainder of a line (and, for quoted scalars, the lines they span).
func (s *scanner) rest() error {
	for !s.eof() {
		c := s.data[s.i]
		if isBlank(c) {
			s.adv()
			continue
		}
		if c == '\r' {
			s.adv()
			continue
		}
		if c == '\n' {
			s.adv()
			return nil
		}
		line, col := s.line, s.col
		first := s.firstOnLn
		s.firstOnLn = false
		if c == '#' && (first || isBlank(s.data[s.i-1])) {
			s.skipLine()
			return nil
		}
		if s.flow > 0 {
			if err := s.flowToken(c, line, col); err != nil {
				return err
			}
			continue
		}
		done, err := s.blockToken(c, line, col)
		if err != nil || done {
			return err
		}
	}
	return nil
}

func (s *scanner) flowToken(c byte, line, col int) error {
	switch {
	case c == '[' || c == '{':
		s.adv()
		if s.n+s.flow >= MaxDepth {
			return s.depthErr(line, col)
		}
		s.flow++
		s.deepest = max(s.deepest, s.n+s.flow)
		s.nodeStart = true
		return s.value(line, col)
	case c == ']' || c == '}':
		s.adv()
		s.flow--
		s.nodeStart = false
		if s.flow == 0 {
			return s.afterBlockValue(col)
		}
	case c == ',':
		s.adv()
		s.nodeStart = true
	case c == ':' && (isSpacez(s.peek(1)) || isFlowInd(s.peek(1)) || !s.nodeStart):
		s.adv()
		s.nodeStart = true
	case (c == '?' || c == '-') && isSpacez(s.peek(1)):
		s.adv()
		s.nodeStart = true
	case s.nodeStart && (c == '"' || c == '\''):
		s.quoted(c)
		s.nodeStart = false
		return s.value(line, col)
	case s.nodeStart && (c == '&' || c == '!'):
		s.property()
	case c == '*':
		s.property()
		s.nodeStart = false
		return s.value(line, col)
	default:
		s.nodeStart = false
		return s.plain(true, line, col)
	}
	return nil
}

// afterBlockValue is reached when a flow collection or quoted scalar in block context ends:
// a ":" may follow, making it a key.
func (s *scanner) afterBlockValue(col int) error {
	for !s.eof() && isBlank(s.data[s.i]) {
		s.adv()
	}
	if s.peek(0) == ':' && isSpacez(s.peek(1)) && s.flow == 0 {
		line := s.line
		s.adv()
		s.nodeStart, s.owner = true, col-1
		return s.structural(levelMap, col-1, line, col)
	}
	return nil
}

// blockToken scans one token in block context; done means the line is finished.
func (s *scanner) blockToken(c byte, line, col int) (bool, error) {
	if s.propCol > 0 && c != '&' && c != '!' {
		// A value with properties starts where they do: "&a key: v" is a key at &.
		if c == '-' || c == '?' || c == ':' {
			s.propCol = 0
		} else {
			col, s.propCol = s.propCol, 0
		}
	}
	c0 := col - 1 // 0-based column, as indentation counts
	// Text after a finished value on the same line is counted as values too: the parser
	// should refuse it, but it is lax. Only at a real start do | and > open a block scalar.
	realStart := s.nodeStart
	s.nodeStart = true
	switch {
	case (c == '-' || c == '?') && isSpacez(s.peek(1)):
		s.adv()
		s.nodeStart, s.owner = true, c0
		kind := levelSeq
		if c == '?' {
			kind = levelMap
		}
		return false, s.structural(kind, c0, line, col)
	case c == ':' && isSpacez(s.peek(1)):
		// A value after an empty key, or after the value before it, which the parser then
		// takes as its key: the mapping stands at the leftmost of the two.
		kc := min(c0, s.lastCol)
		s.adv()
		s.nodeStart, s.owner = true, kc
		return false, s.structural(levelMap, kc, line, col)
	case c == '[' || c == '{':
		s.adv()
		if s.n+s.flow >= MaxDepth {
			return false, s.depthErr(line, col)
		}
		s.flow++
		s.deepest = max(s.deepest, s.n+s.flow)
		s.nodeStart = true
		return false, s.value(line, col)
	case c == '"' || c == '\'':
		s.quoted(c)
		s.nodeStart = false
		if err := s.value(line, col); err != nil {
			return false, err
		}
		return false, s.afterBlockValue(col)
	case (c == '|' || c == '>') && realStart:
		s.blockOwner, s.blockIndent = max(s.owner, 0), -1 // the parser wants even a top-level one indented
		s.skipLine()
		return true, s.value(line, col)
	case c == '&' || c == '!':
		if s.propCol == 0 {
			s.propCol = col
		}
		s.property()
		return false, nil
	case c == '*':
		s.property()
		s.nodeStart = false
		if err := s.value(line, col); err != nil {
			return false, err
		}
		return false, s.afterBlockValue(col)
	}
	s.nodeStart = false
	return false, s.plain(false, line, col)
}

// property skips an anchor, alias or tag name.
func (s *scanner) property() {
	s.adv()
	for !s.eof() && !isSpacez(s.data[s.i]) && !(s.flow > 0 && isFlowInd(s.data[s.i])) {
		s.adv()
	}
}

// quoted skips a quoted scalar, which may span lines.
func (s *scanner) quoted(q byte) {
	s.adv()
	for !s.eof() {
		c := s.data[s.i]
		switch {
		case q == '"' && c == '\\':
			s.adv()
			if !s.eof() {
				s.adv()
			}
			continue
		case c == q && q == '\'' && s.peek(1) == '\'':
			s.adv()
		case c == q:
			s.adv()
			return
		}
		s.adv()
	}
}

// plain scans a plain scalar to its end on this line: in flow context a flow indicator, ": "
// or " #"; in block context ": " (it was a key) or " #". One ending the line in block context
// may continue on the next, more indented, lines.
func (s *scanner) plain(inFlow bool, line, col int) error {
	start := s.i
	if err := s.value(line, col); err != nil {
		return err
	}
	for !s.eof() {
		c := s.data[s.i]
		switch {
		case c == '\n' || c == '\r':
			if !inFlow {
				s.plainOwner = s.owner
			}
			return nil
		case c == '#' && s.i > start && isBlank(s.data[s.i-1]):
			s.toEOL() // the rest of the line is a comment
			return nil
		case c == ':' && (isSpacez(s.peek(1)) || inFlow && isFlowInd(s.peek(1))):
			s.adv()
			s.nodeStart = true
			s.plainOwner = noPlain
			if inFlow {
				return nil
			}
			// a key: its column owns the value
			s.owner = col - 1
			return s.structural(levelMap, col-1, line, col)
		case inFlow && isFlowInd(c):
			return nil
		}
		s.adv()
	}
	return nil
}

// toEOL moves to the end of the line, leaving the line break for rest to take.
func (s *scanner) toEOL() {
	for !s.eof() && s.data[s.i] != '\n' {
		s.adv()
	}
}
