//! A process's name for the viewer: the program it runs, which for an interpreter is the
//! script, module or archive it was given rather than the interpreter itself.
//!
//! - Usually the last path component of `argv[0]`; if the program rewrote its title there
//!   (`nginx: master process /usr/sbin/nginx -c /etc/nginx.conf`, which contains spaces) or
//!   left it empty, the kernel's name for it (`comm`: the executable's name).
//! - Interpreters (Python and PyPy, Perl, Ruby, Node.js, Java, with or without a version in
//!   their name) are named after what they run: `python3 -m http.server` is `http.server`,
//!   `python3 app.py` and `perl /srv/app.pl` are `app.py` and `app.pl`, `node server.js` is
//!   `server.js`, `java -jar app.jar` is `app.jar` and `java -cp lib com.acme.Main` is
//!   `Main`. Their options are skipped (including those that take a value, attached or
//!   not); code given on the command line (`-c`, `-e`, `--eval`, …) or a script read from
//!   stdin keeps the interpreter's name. Processes that named themselves `-m` — an argv[0]
//!   of `-m`, as Python shows it while it looks for the module — are named the same way.

/// How an interpreter's command line reads.
struct Syntax {
    /// Single-letter options that take a value (attached, or the next argument).
    short_values: &'static str,
    /// Single-letter options whose value, if any, is attached (`-Ilib`, `-l`).
    short_attached: &'static str,
    /// Single-letter options whose value is code: no script.
    short_code: &'static str,
    /// The single-letter option whose value is the module to run (Python's `-m`).
    short_module: Option<char>,
    /// Long options that take the next argument as their value (unless given `--x=v`).
    long_values: &'static [&'static str],
    /// Long options whose value is code.
    long_code: &'static [&'static str],
}

const PYTHON: Syntax = Syntax {
    short_values: "WX",
    short_attached: "",
    short_code: "c",
    short_module: Some('m'),
    long_values: &["--check-hash-based-pycs"],
    long_code: &[],
};
const PERL: Syntax = Syntax {
    short_values: "",
    short_attached: "IMmxil0CdD",
    short_code: "eE",
    short_module: None,
    long_values: &[],
    long_code: &[],
};
const RUBY: Syntax = Syntax {
    short_values: "ICEr",
    short_attached: "FxKTW0",
    short_code: "e",
    short_module: None,
    long_values: &[],
    long_code: &[],
};
const NODE: Syntax = Syntax {
    short_values: "rC",
    short_attached: "",
    short_code: "ep",
    short_module: None,
    long_values: &[
        "--require",
        "--import",
        "--loader",
        "--experimental-loader",
        "--conditions",
        "--input-type",
        "--title",
        "--env-file",
        "--inspect-port",
    ],
    long_code: &["--eval", "--print"],
};

/// Options of `java` that take the next argument as their value.
const JAVA_VALUES: &[&str] = &[
    "-cp",
    "-classpath",
    "--class-path",
    "-p",
    "--module-path",
    "--upgrade-module-path",
    "--add-modules",
    "--add-opens",
    "--add-exports",
    "--add-reads",
    "--patch-module",
    "--limit-modules",
    "--enable-native-access",
];

/// The name for a process whose command line is `argv` (`comm`: the kernel's name for it).
pub fn program_name(argv: &[String], comm: impl FnOnce() -> Option<String>) -> String {
    let argv0 = argv.first().map(String::as_str);
    let exe = argv0
        .filter(|a| !a.contains(' '))
        .and_then(|a| a.rsplit('/').next())
        .filter(|p| !p.is_empty() && *p != "-m")
        .map(str::to_string)
        .or_else(comm)
        .unwrap_or_default();
    let rest = argv.get(1..).unwrap_or_default();
    if argv0 == Some("-m") {
        return rest.first().cloned().unwrap_or(exe);
    }
    run_by(&exe, rest).unwrap_or(exe)
}

/// What interpreter `exe` runs, given its arguments `args` (`None`: not an interpreter, or
/// no script).
fn run_by(exe: &str, args: &[String]) -> Option<String> {
    let kind = exe.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    match kind {
        "python" | "pypy" => script(&PYTHON, args),
        "perl" => script(&PERL, args),
        "ruby" => script(&RUBY, args),
        "node" | "nodejs" => script(&NODE, args),
        "java" => java(args),
        _ => None,
    }
}

/// The last path component of `p`.
fn base(p: &str) -> Option<String> {
    p.rsplit('/')
        .next()
        .filter(|b| !b.is_empty())
        .map(str::to_string)
}

/// The script (or module) an interpreter of syntax `s` runs.
fn script(s: &Syntax, args: &[String]) -> Option<String> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            return it.next().and_then(|p| base(p));
        }
        if a == "-" || !a.starts_with('-') {
            return (a != "-").then(|| base(a)).flatten();
        }
        if let Some(long) = a.strip_prefix("--") {
            let name = format!("--{}", long.split('=').next().unwrap_or_default());
            if s.long_code.contains(&name.as_str()) {
                return None;
            }
            if s.long_values.contains(&name.as_str()) && !long.contains('=') {
                it.next();
            }
            continue;
        }
        // A cluster of single-letter options; the first that takes a value ends it.
        for (i, c) in a.char_indices().skip(1) {
            let attached = &a[i + c.len_utf8()..];
            if s.short_code.contains(c) {
                return None;
            }
            if Some(c) == s.short_module {
                let m = if attached.is_empty() {
                    it.next()?.as_str()
                } else {
                    attached
                };
                return Some(m.to_string());
            }
            if s.short_values.contains(c) {
                if attached.is_empty() {
                    it.next();
                }
                break;
            }
            if s.short_attached.contains(c) {
                break;
            }
        }
    }
    None
}

/// What `java` runs: the archive of `-jar`, the module of `-m`/`--module`, or the main
/// class (its last component; a source file by its name).
fn java(args: &[String]) -> Option<String> {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-jar" => return it.next().and_then(|p| base(p)),
            "-m" | "--module" => return it.next().map(|m| main_of_module(m)),
            _ if a.starts_with("--module=") => return Some(main_of_module(&a[9..])),
            _ if JAVA_VALUES.contains(&a.as_str()) => {
                it.next();
            }
            _ if a.starts_with('-') => {}
            _ if a.ends_with(".java") => return base(a),
            _ => return a.rsplit('.').next().map(str::to_string),
        }
    }
    None
}

/// `module/main.Class` → `Class`; `module` alone → `module`.
fn main_of_module(m: &str) -> String {
    match m.split_once('/') {
        Some((_, class)) => class.rsplit('.').next().unwrap_or(class).to_string(),
        None => m.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::program_name;

    fn name(cmd: &str) -> String {
        let argv: Vec<String> = cmd.split(' ').map(str::to_string).collect();
        program_name(&argv, || Some("comm".to_string()))
    }

    #[test]
    fn rewritten_titles_name_the_executable() {
        let comm = || Some("nginx".to_string());
        let one = |s: &str| vec![s.to_string()];
        assert_eq!(program_name(&one("/usr/sbin/nginx"), comm), "nginx");
        let title = one("nginx: master process /usr/sbin/nginx -c /x/nginx.conf");
        assert_eq!(program_name(&title, comm), "nginx");
        assert_eq!(program_name(&one(""), comm), "nginx");
        assert_eq!(program_name(&[], || None), "");
    }

    #[test]
    fn interpreters_are_named_after_what_they_run() {
        for (cmd, want) in [
            ("python3 -m http.server 0", "http.server"),
            ("/usr/bin/python3.11 -u -m flask run", "flask"),
            ("python -um pkg.tool", "pkg.tool"),
            ("python3 -mserver", "server"),
            ("python3 -W ignore -X dev /srv/app.py --port 1", "app.py"),
            ("python3 -Wignore app.py", "app.py"),
            ("pypy3 ./bench.py", "bench.py"),
            ("python3 -- -odd.py", "-odd.py"),
            ("perl -w -Ilib /opt/tool.pl x", "tool.pl"),
            ("perl -Imodules -l app.pl", "app.pl"),
            ("ruby -I lib -r json app.rb", "app.rb"),
            (
                "node --require ./hook.js --max-old-space-size=512 server.js",
                "server.js",
            ),
            ("nodejs app.js", "app.js"),
            ("java -Xmx1g -jar /srv/app.jar --flag", "app.jar"),
            ("java -cp lib:. com.acme.Main arg", "Main"),
            ("java --module-path mods -m app/com.acme.Main", "Main"),
            ("java --module=app", "app"),
            ("java Hello.java", "Hello.java"),
            ("-m pingredis", "pingredis"),
        ] {
            assert_eq!(name(cmd), want, "{cmd}");
        }
    }

    #[test]
    fn inline_code_stdin_and_other_programs_keep_their_names() {
        for (cmd, want) in [
            ("python3 -c print(1)", "python3"),
            ("python3", "python3"),
            ("python3 -", "python3"),
            ("python3 -i", "python3"),
            ("perl -e print", "perl"),
            ("node --eval 1", "node"),
            ("node -p 1", "node"),
            ("ruby -e 1", "ruby"),
            ("java -version", "java"),
            ("sh -c true", "sh"),
            ("/usr/sbin/nginx -g daemon", "nginx"),
            ("pythonista app.py", "pythonista"),
        ] {
            assert_eq!(name(cmd), want, "{cmd}");
        }
    }
}
