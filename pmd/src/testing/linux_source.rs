//! Definitions a driver transcribed, held against Linux's own at test time.
//!
//! Debian's `linux-source` package puts the kernel's tree in
//! `/usr/src/linux-source-*.tar.xz`. A test extracts the driver's files
//! ([`LinuxSource::extract`]), names each rpmd value beside a C expression
//! over Linux's definitions ([`Check`]), and has a C compiler evaluate the
//! expressions ([`LinuxSource::assert_agree`]): a mismatch names the
//! definition. No kernel source is committed.
//!
//! Headers that compile on their own (igb's) are included as they are.
//! Driver headers that pull in half the kernel (mlx4's) are cut instead
//! ([`Definitions`]): the `#define`s, `enum`s and `struct`s the
//! expressions reach, copied out of the files in the order they appear and
//! compiled with stub kernel types, so the compiler lays the structs out
//! exactly as the kernel's build does.
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One definition: what rpmd calls it, rpmd's value, and the C
/// expression over Linux's definitions that must equal it.
#[derive(Clone, Debug)]
pub struct Check {
    /// rpmd's name for it.
    pub name: String,
    /// rpmd's value.
    pub ours: u64,
    /// The C expression giving Linux's.
    pub linux: String,
}

impl Check {
    /// A check of `ours` (named `name`) against the C expression `linux`.
    pub fn new(name: impl Into<String>, ours: u64, linux: impl Into<String>) -> Self {
        Check {
            name: name.into(),
            ours,
            linux: linux.into(),
        }
    }
}

/// Kernel types and attributes the cut definitions use, for a user-space
/// compiler.
pub const KERNEL_STUBS: &str = "#include <stdio.h>\n#include <stddef.h>\n#include <stdint.h>\n\
    typedef uint8_t u8; typedef uint16_t u16; typedef uint32_t u32; typedef uint64_t u64;\n\
    typedef int8_t s8; typedef int16_t s16; typedef int32_t s32; typedef int64_t s64;\n\
    typedef uint8_t __u8; typedef uint16_t __u16; typedef uint32_t __u32; typedef uint64_t __u64;\n\
    typedef uint16_t __be16; typedef uint32_t __be32; typedef uint64_t __be64;\n\
    typedef uint16_t __le16; typedef uint32_t __le32; typedef uint64_t __le64;\n\
    typedef _Bool bool;\n\
    #define __packed __attribute__((packed))\n\
    #define __aligned(x) __attribute__((aligned(x)))\n\
    #define BIT(n) (1UL << (n))\n#define BIT_ULL(n) (1ULL << (n))\n\
    #define ETH_ALEN 6\n";

/// An extracted part of the newest `linux-source` tarball, in a scratch
/// folder removed on drop.
pub struct LinuxSource {
    tarball: PathBuf,
    scratch: PathBuf,
    top: PathBuf,
}

impl LinuxSource {
    /// The newest `/usr/src/linux-source-*.tar.xz`, if installed.
    pub fn tarball() -> Option<PathBuf> {
        let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/src")
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| {
                let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                n.starts_with("linux-source-") && n.ends_with(".tar.xz")
            })
            .collect();
        found.sort();
        found.pop()
    }

    /// Extracts the files matching `patterns` (tar wildcards under the
    /// tree's top folder, as `drivers/net/ethernet/intel/igb/*.h`). `None`
    /// when the package is missing, after reporting `test` as lacking its
    /// peer (which fails it under CI).
    pub fn extract(test: &str, patterns: &[&str]) -> Option<Self> {
        let Some(tarball) = Self::tarball() else {
            crate::testing::missing_peer(
                test,
                "no /usr/src/linux-source-*.tar.xz (apt-get install linux-source)",
            );
            return None;
        };
        let scratch = std::env::temp_dir().join(format!(
            "rpmd-linux-{}-{}",
            std::process::id(),
            test.replace(|c: char| !c.is_ascii_alphanumeric(), "_")
        ));
        let _ = std::fs::remove_dir_all(&scratch);
        std::fs::create_dir_all(&scratch).expect("scratch folder");
        let st = Command::new("tar")
            .arg("-xJf")
            .arg(&tarball)
            .arg("-C")
            .arg(&scratch)
            .arg("--wildcards")
            .args(patterns.iter().map(|p| format!("*/{p}")))
            .status()
            .expect("run tar");
        assert!(
            st.success(),
            "extracting {patterns:?} from {}",
            tarball.display()
        );
        let top = std::fs::read_dir(&scratch)
            .expect("read the extraction")
            .filter_map(|e| e.ok())
            .find(|e| e.file_name().to_string_lossy().starts_with("linux-source-"))
            .expect("the tarball's top folder")
            .path();
        Some(LinuxSource {
            tarball,
            scratch,
            top,
        })
    }

    /// The tarball the files came from.
    pub fn name(&self) -> String {
        self.tarball.display().to_string()
    }

    /// A path inside the tree.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.top.join(rel)
    }

    /// The text of `rel`.
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
    }

    /// Compiles `prelude` and a `main` printing every check's C expression
    /// (with `include` on the include path), runs it, and returns what
    /// differs from rpmd's values, one line each.
    fn evaluate(&self, include: Option<&Path>, prelude: &str, checks: &[Check]) -> Vec<String> {
        let mut c = String::from(prelude);
        c.push_str("\nint main(void) {\n");
        for check in checks {
            c.push_str(&format!(
                "    printf(\"%llu\\n\", (unsigned long long)({}));\n",
                check.linux
            ));
        }
        c.push_str("    return 0;\n}\n");
        let src = self.scratch.join("defs.c");
        std::fs::write(&src, &c).expect("write defs.c");
        let exe = self.scratch.join("defs");
        let mut cc = Command::new("cc");
        if let Some(dir) = include {
            cc.arg("-I").arg(dir);
        }
        let out = cc.arg("-o").arg(&exe).arg(&src).output().expect("run cc");
        assert!(
            out.status.success(),
            "compiling the definitions taken from {}:\n{}",
            self.name(),
            String::from_utf8_lossy(&out.stderr)
        );
        let run = Command::new(&exe).output().expect("run defs");
        let linux: Vec<u64> = String::from_utf8_lossy(&run.stdout)
            .lines()
            .map(|l| l.trim().parse().expect("a number"))
            .collect();
        assert_eq!(linux.len(), checks.len(), "one value per definition");
        checks
            .iter()
            .zip(linux)
            .filter(|(c, l)| !same(c.ours, *l))
            .map(|(c, l)| {
                format!(
                    "{}: rpmd {:#x}, Linux's {} = {l:#x}",
                    c.name, c.ours, c.linux
                )
            })
            .collect()
    }
}

/// Whether rpmd's value is Linux's. A C enumerator is an `int`, so
/// Linux's `1 << 31` or `0xa << 28` reads back sign-extended: such a value
/// stands for its low 32 bits, the bits the hardware field holds.
fn same(ours: u64, linux: u64) -> bool {
    let sign_extended_int = linux >> 31 == (1 << 33) - 1;
    ours == linux || (sign_extended_int && ours == linux & 0xffff_ffff)
}

impl LinuxSource {
    /// Evaluates the checks (a C program printing each expression) and
    /// fails listing every definition that differs; else says how many
    /// agree.
    pub fn assert_agree(&self, include: Option<&Path>, prelude: &str, checks: &[Check]) {
        let wrong = self.evaluate(include, prelude, checks);
        assert!(
            wrong.is_empty(),
            "definitions that differ from Linux's ({}):\n{}",
            self.name(),
            wrong.join("\n")
        );
        eprintln!("{} definitions agree with {}", checks.len(), self.name());
    }
}

impl Drop for LinuxSource {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

/// A top-level `enum`, `struct` or `union` definition cut from a file.
struct Block {
    /// `struct NAME` / `union NAME` / `enum NAME` (empty for an anonymous
    /// enum).
    tag: String,
    /// The enumerators an enum defines.
    enumerators: Vec<String>,
    text: String,
}

/// The `#define`s and top-level `enum`/`struct`/`union` definitions of a
/// set of C files, from which the part a list of expressions reaches is
/// cut out as one compilable unit ([`Definitions::reaching`]).
#[derive(Default)]
pub struct Definitions {
    /// Name → the whole `#define` line; the first definition wins.
    macros: HashMap<String, String>,
    macro_order: Vec<String>,
    blocks: Vec<Block>,
}

impl Definitions {
    /// Reads the files' definitions, in order (headers before the `.c`
    /// files that use them).
    pub fn parse<'a>(files: impl IntoIterator<Item = &'a str>) -> Self {
        let mut defs = Definitions::default();
        for text in files {
            defs.add_file(text);
        }
        defs
    }

    fn add_file(&mut self, text: &str) {
        let clean = strip_comments(text).replace("\\\n", " ");
        let mut code = String::new();
        for line in clean.lines() {
            let t = line.trim_start();
            if let Some(rest) = t.strip_prefix("#define") {
                let name: String = rest
                    .trim_start()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !self.macros.contains_key(&name) {
                    self.macro_order.push(name.clone());
                    self.macros.insert(name, t.to_string());
                }
            } else if !t.starts_with('#') {
                code.push_str(line);
                code.push('\n');
            }
        }
        self.add_blocks(&code);
    }

    /// Finds `enum [NAME] {`, `struct NAME {` and `union NAME {` at brace
    /// depth 0 and keeps each up to its closing `};`.
    fn add_blocks(&mut self, code: &str) {
        let b = code.as_bytes();
        let (mut i, mut depth) = (0, 0usize);
        while i < b.len() {
            match b[i] {
                b'{' => depth += 1,
                b'}' => depth = depth.saturating_sub(1),
                b'"' | b'\'' => i = skip_literal(b, i),
                _ if depth == 0 && starts_word(b, i) => {
                    if let Some((block, end)) = block_at(code, i) {
                        self.blocks.push(block);
                        i = end;
                        continue;
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }

    /// The C source of every macro and block `exprs` reach, directly or
    /// through other definitions, blocks in the files' order.
    pub fn reaching(&self, exprs: &[String]) -> String {
        let mut wanted: Vec<String> = exprs.iter().flat_map(|e| names(e)).collect();
        let mut seen: HashSet<String> = HashSet::new();
        let mut blocks: HashSet<usize> = HashSet::new();
        let mut defined: HashSet<&str> = HashSet::new();
        while let Some(name) = wanted.pop() {
            if !seen.insert(name.clone()) {
                continue;
            }
            if let Some(line) = self.macros.get(&name) {
                wanted.extend(names(line));
            }
            let found = self
                .blocks
                .iter()
                .position(|blk| blk.tag == name || blk.enumerators.contains(&name));
            if let Some(at) = found {
                let blk = &self.blocks[at];
                // A second enum defining the same enumerator (two headers
                // declaring one constant) would not compile: the first wins.
                if blk.enumerators.iter().any(|e| defined.contains(e.as_str())) {
                    continue;
                }
                if blocks.insert(at) {
                    defined.extend(blk.enumerators.iter().map(String::as_str));
                    wanted.extend(names(&blk.text));
                }
            }
        }
        let mut out = String::new();
        for name in &self.macro_order {
            if seen.contains(name) {
                out.push_str(&self.macros[name]);
                out.push('\n');
            }
        }
        let mut order: Vec<usize> = blocks.into_iter().collect();
        order.sort_unstable();
        for at in order {
            out.push_str(&self.blocks[at].text);
            out.push('\n');
        }
        out
    }
}

/// Identifiers in `text`, with `struct X`, `union X` and `enum X` kept
/// whole.
fn names(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut words = text
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty() && !w.starts_with(|c: char| c.is_ascii_digit()))
        .peekable();
    while let Some(w) = words.next() {
        if matches!(w, "struct" | "union" | "enum") {
            if let Some(n) = words.peek() {
                out.push(format!("{w} {n}"));
            }
        }
        out.push(w.to_string());
    }
    out
}

fn strip_comments(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"/*") {
            let end = text[i + 2..].find("*/").map_or(b.len(), |e| i + 2 + e + 2);
            out.push(b' ');
            i = end;
        } else if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i] == b'"' || b[i] == b'\'' {
            let end = skip_literal(b, i) + 1;
            out.extend_from_slice(&b[i..end.min(b.len())]);
            i = end;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The index of a string or character literal's closing quote.
fn skip_literal(b: &[u8], start: usize) -> usize {
    let quote = b[start];
    let mut i = start + 1;
    while i < b.len() && b[i] != quote && b[i] != b'\n' {
        i += if b[i] == b'\\' { 2 } else { 1 };
    }
    i.min(b.len().saturating_sub(1))
}

fn starts_word(b: &[u8], i: usize) -> bool {
    i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')
}

/// The block starting at `at` (`enum`, `struct` or `union` followed by an
/// optional name and `{`) and the index just past its `;`.
fn block_at(code: &str, at: usize) -> Option<(Block, usize)> {
    let rest = &code[at..];
    let kw = ["enum", "struct", "union"].into_iter().find(|k| {
        rest.starts_with(k)
            && !rest[k.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
    })?;
    let after = rest[kw.len()..].trim_start();
    let name: String = after
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    if !after[name.len()..].trim_start().starts_with('{') || (name.is_empty() && kw != "enum") {
        return None;
    }
    let open = at + rest.find('{')?;
    let mut depth = 0;
    let mut close = None;
    for (k, c) in code[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    close = Some(open + k);
                    break;
                }
            }
            _ => {}
        }
    }
    let close = close?;
    let semi = close + code[close..].find(';')?;
    let text = code[at..=semi].to_string();
    let enumerators = if kw == "enum" {
        code[open + 1..close]
            .split(',')
            .filter_map(|e| {
                let n: String = e
                    .trim_start()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                (!n.is_empty()).then_some(n)
            })
            .collect()
    } else {
        Vec::new()
    };
    let tag = if name.is_empty() {
        String::new()
    } else {
        format!("{kw} {name}")
    };
    Some((
        Block {
            tag,
            enumerators,
            text,
        },
        semi + 1,
    ))
}
