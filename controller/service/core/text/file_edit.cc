#include "core/text/file_edit.h"

#include <algorithm>

namespace pvs::service {

namespace {

std::vector<std::size_t> find_all(std::string_view content, std::string_view needle) {
  std::vector<std::size_t> out;
  for (std::size_t pos = content.find(needle); pos != std::string_view::npos;
       pos = content.find(needle, pos + needle.size())) {
    out.push_back(pos);
  }
  return out;
}

// "\n" -> "\r\n" where the '\n' has no '\r' before it.
std::string to_crlf(std::string_view s) {
  std::string out;
  out.reserve(s.size() + s.size() / 16);
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\n' && (i == 0 || s[i - 1] != '\r')) out += '\r';
    out += s[i];
  }
  return out;
}

EditError edit_error(EditError::Kind kind, std::string message, std::size_t n = 0) {
  EditError e;
  e.kind = kind;
  e.occurrences = n;
  e.message = std::move(message);
  return e;
}

// The lines of a text: offsets of each line's start; a final line without '\n' counts.
struct Lines {
  std::string_view text;
  std::vector<std::size_t> starts;

  explicit Lines(std::string_view t) : text(t) {
    if (t.empty()) return;
    starts.push_back(0);
    for (std::size_t i = 0; i + 1 < t.size(); ++i)
      if (t[i] == '\n') starts.push_back(i + 1);
  }
  std::size_t count() const { return starts.size(); }
  std::size_t line_of(std::size_t offset) const {
    auto it = std::upper_bound(starts.begin(), starts.end(), offset);
    return static_cast<std::size_t>(it - starts.begin()) - 1;
  }
  // Line i with its '\n' (if any).
  std::size_t begin(std::size_t i) const { return starts[i]; }
  std::size_t end(std::size_t i) const { return i + 1 < count() ? starts[i + 1] : text.size(); }
  std::string_view line(std::size_t i) const {
    std::string_view l = text.substr(begin(i), end(i) - begin(i));
    if (!l.empty() && l.back() == '\n') l.remove_suffix(1);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    return l;
  }
};

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> out;
  Lines lines(text);
  for (std::size_t i = 0; i < lines.count(); ++i) out.push_back(lines.line(i));
  return out;
}

// One change: old lines [a, b] and what replaces them.
struct Change {
  std::size_t a = 0, b = 0;
  std::string new_text;
};

std::vector<Change> changes_of(const Lines& old_lines, const EditResult& edit) {
  std::vector<Change> out;
  const auto& off = edit.offsets;
  std::size_t len = edit.old_length;
  std::size_t i = 0;
  while (i < off.size()) {
    Change c;
    c.a = old_lines.line_of(off[i]);
    c.b = old_lines.line_of(off[i] + len - 1);
    std::size_t j = i + 1;
    while (true) {
      while (j < off.size() && old_lines.line_of(off[j]) <= c.b + 1) {  // touching: one change
        c.b = std::max(c.b, old_lines.line_of(off[j] + len - 1));
        ++j;
      }
      // The region's text with occurrences i..j-1 replaced.
      std::size_t from = old_lines.begin(c.a), to = old_lines.end(c.b);
      c.new_text.clear();
      std::size_t pos = from;
      for (std::size_t k = i; k < j; ++k) {
        c.new_text.append(old_lines.text.substr(pos, off[k] - pos));
        c.new_text += edit.new_text;
        pos = off[k] + len;
      }
      c.new_text.append(old_lines.text.substr(pos, to - pos));
      // A replacement that ate the region's last '\n' joins it with the next line.
      bool region_ends_nl = to > from && old_lines.text[to - 1] == '\n';
      bool joins = !c.new_text.empty() && c.new_text.back() != '\n';
      if (region_ends_nl && joins && c.b + 1 < old_lines.count()) {
        ++c.b;
        continue;
      }
      break;
    }
    out.push_back(std::move(c));
    i = j;
  }
  return out;
}

class DiffWriter {
 public:
  explicit DiffWriter(const DiffOptions& o) : o_(o) {}
  bool full() const { return full_; }
  void header(std::string_view text) { out_.append(text); }
  void line(char sign, std::string_view text) {
    if (full_) return;
    std::string l(1, sign);
    if (text.size() > o_.max_line_bytes) {
      l.append(text.substr(0, o_.max_line_bytes));
      l += " [... line cut]";
    } else {
      l.append(text);
    }
    l += '\n';
    if (out_.size() + l.size() > o_.max_bytes) {
      full_ = true;
      return;
    }
    out_ += l;
  }
  std::string take() { return std::move(out_); }

 private:
  const DiffOptions& o_;
  std::string out_;
  bool full_ = false;
};

}  // namespace

bool looks_binary(std::string_view content) {
  return content.find('\0') != std::string_view::npos;
}

tl::expected<EditResult, EditError> apply_edit(std::string_view content, const EditSpec& spec) {
  using K = EditError::Kind;
  if (spec.old_string.empty())
    return tl::unexpected(edit_error(K::kEmptyOld, "old_string must not be empty"));
  if (spec.old_string == spec.new_string)
    return tl::unexpected(edit_error(K::kSame, "old_string and new_string are the same"));
  if (looks_binary(content))
    return tl::unexpected(
        edit_error(K::kBinary,
                   "the file looks binary (it has NUL bytes); only text files can be "
                   "edited: write the whole file instead"));
  EditResult r;
  std::string old_text = spec.old_string, new_text = spec.new_string;
  auto found = find_all(content, old_text);
  if (found.empty() && content.find("\r\n") != std::string_view::npos &&
      old_text.find('\n') != std::string::npos) {
    std::string crlf_old = to_crlf(old_text);
    found = find_all(content, crlf_old);
    if (!found.empty()) {
      old_text = std::move(crlf_old);
      new_text = to_crlf(new_text);
      r.crlf = true;
    }
  }
  if (found.empty())
    return tl::unexpected(edit_error(
        K::kNotFound,
        "old_string not found in the file; it must match exactly, whitespace and indentation "
        "included (read the file again and copy the text)"));
  if (found.size() > 1 && !spec.replace_all)
    return tl::unexpected(edit_error(
        K::kAmbiguous,
        "old_string occurs " + std::to_string(found.size()) +
            " times; pass replace_all to replace every occurrence, or add surrounding lines to "
            "old_string so that it matches exactly once",
        found.size()));
  r.content.reserve(content.size() + found.size() * new_text.size());
  std::size_t pos = 0;
  for (std::size_t at : found) {
    r.content.append(content.substr(pos, at - pos));
    r.content += new_text;
    pos = at + old_text.size();
  }
  r.content.append(content.substr(pos));
  r.replaced = found.size();
  r.offsets = std::move(found);
  r.old_length = old_text.size();
  r.new_text = std::move(new_text);
  return r;
}

std::string unified_diff(std::string_view path, std::string_view old_content,
                         const EditResult& edit, const DiffOptions& options) {
  Lines old_lines(old_content);
  std::vector<Change> changes = changes_of(old_lines, edit);
  DiffWriter w(options);
  w.header("--- " + std::string(path) + "\n+++ " + std::string(path) + "\n");
  std::size_t ctx = options.context;
  long delta = 0;  // new line number - old line number before the current change
  std::size_t i = 0;
  while (i < changes.size() && !w.full()) {
    // One hunk: changes i..j-1, whose gaps are at most 2 * context lines.
    std::size_t j = i + 1;
    while (j < changes.size() && changes[j].a - changes[j - 1].b - 1 <= 2 * ctx) ++j;
    std::size_t first = changes[i].a >= ctx ? changes[i].a - ctx : 0;
    std::size_t last = std::min(old_lines.count() - 1, changes[j - 1].b + ctx);
    std::size_t old_count = last - first + 1, new_count = old_count;
    std::vector<std::vector<std::string_view>> news;
    for (std::size_t k = i; k < j; ++k) {
      news.push_back(split_lines(changes[k].new_text));
      new_count = new_count - (changes[k].b - changes[k].a + 1) + news.back().size();
    }
    long new_first = static_cast<long>(first) + delta;
    auto start = [](long line, std::size_t count) {
      return std::to_string(count == 0 ? line : line + 1) + "," + std::to_string(count);
    };
    w.header("");
    w.line('@', "@ -" + start(static_cast<long>(first), old_count) + " +" +
                    start(new_first, new_count) + " @@");
    std::size_t line = first;
    for (std::size_t k = i; k < j; ++k) {
      for (; line < changes[k].a; ++line) w.line(' ', old_lines.line(line));
      for (line = changes[k].a; line <= changes[k].b; ++line) w.line('-', old_lines.line(line));
      for (auto l : news[k - i]) w.line('+', l);
      delta += static_cast<long>(news[k - i].size()) -
               static_cast<long>(changes[k].b - changes[k].a + 1);
    }
    for (; line <= last; ++line) w.line(' ', old_lines.line(line));
    i = j;
  }
  std::string out = w.take();
  if (w.full() || i < changes.size()) out += "... (diff cut)\n";
  return out;
}

}  // namespace pvs::service
