//! `--config FILE` and `--check-config FILE`: a TOML file whose keys are the command line's long
//! options (`server_timeout_ms = 500` is `--server-timeout-ms 500`, `servers = [...]` is one
//! `--server` each, `failover = true` is `--failover`). The file's options go first and the
//! command line's after them, so every option given on the command line overrides the file
//! (and `--server` on the command line replaces the file's servers); clap then validates the
//! whole as it validates a command line, so the file means exactly what the options mean.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::CommandFactory;

use crate::cli::Args;

/// What the command line asked of a configuration file.
pub struct Expanded {
    /// The arguments to parse: the file's options, then the command line's.
    pub argv: Vec<OsString>,
    /// `--check-config FILE`: validate and exit.
    pub check_only: Option<PathBuf>,
    /// The file read (`--config` or `--check-config`).
    pub file: Option<PathBuf>,
}

/// Expands `--config FILE` / `--check-config FILE` in `argv` (program name first).
pub fn expand(argv: Vec<OsString>) -> Result<Expanded, String> {
    let mut rest = Vec::with_capacity(argv.len());
    let (mut file, mut check_only) = (None, None);
    let mut args = argv.into_iter();
    rest.extend(args.next());
    while let Some(arg) = args.next() {
        let text = arg.to_string_lossy().into_owned();
        let (flag, inline) = match text.split_once('=') {
            Some((flag, value)) => (flag.to_string(), Some(value.to_string())),
            None => (text.clone(), None),
        };
        if flag == "--config" || flag == "--check-config" {
            let value = match inline {
                Some(value) => value,
                None => args.next().map(|v| v.to_string_lossy().into_owned()).ok_or(format!("{flag} needs a FILE"))?,
            };
            if flag == "--check-config" {
                check_only = Some(PathBuf::from(&value));
            }
            file = Some(PathBuf::from(value));
        } else {
            rest.push(arg);
        }
    }
    let Some(file) = file else { return Ok(Expanded { argv: rest, check_only, file: None }) };
    let text = memrelay::own_files::read_to_string(&file, memrelay::own_files::MAX_SETTINGS_FILE)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let servers_on_command_line = rest.iter().any(|a| {
        let a = a.to_string_lossy();
        a == "--server" || a.starts_with("--server=")
    });
    let from_file = options(&file, &text, servers_on_command_line)?;
    let mut argv: Vec<OsString> = rest.drain(..1).collect();
    argv.extend(from_file.into_iter().map(OsString::from));
    argv.extend(rest);
    Ok(Expanded { argv, check_only, file: Some(file) })
}

/// The command-line options a file's text stands for.
fn options(file: &Path, text: &str, skip_servers: bool) -> Result<Vec<String>, String> {
    let table: toml::Table =
        text.parse().map_err(|e: toml::de::Error| format!("{}: {}", file.display(), one_line(&e)))?;
    let known: Vec<String> = Args::command().get_arguments().filter_map(|a| a.get_long().map(str::to_string)).collect();
    let mut out = Vec::new();
    for (key, value) in &table {
        let option = match key.as_str() {
            "servers" => "server".to_string(),
            "routes" => "route".to_string(),
            "pools" => "pool".to_string(),
            _ => key.replace('_', "-"),
        };
        let not_an_option = ["help", "version", "config", "check-config"].contains(&option.as_str());
        if !known.contains(&option) || not_an_option {
            return Err(format!(
                "{}: unknown key `{key}` (the keys are the command line's long options)",
                file.display()
            ));
        }
        let bad = |what: &str| format!("{}: `{key}` {what}", file.display());
        match value {
            toml::Value::Array(items) if option == "server" => {
                if skip_servers {
                    continue;
                }
                for item in items {
                    let server = server_spec(item).map_err(|what| bad(&what))?;
                    out.extend(["--server".to_string(), server]);
                }
            }
            toml::Value::Array(items) if option == "route" => {
                for item in items {
                    out.extend(["--route".to_string(), route_spec(item).map_err(|what| bad(&what))?]);
                }
            }
            // `[pools.NAME]` tables: one `--pool` each, as the inline table it reads (with its
            // name inside).
            toml::Value::Table(pools) if option == "pool" => {
                for (name, pool) in pools {
                    let toml::Value::Table(pool) = pool else { return Err(bad("must be tables ([pools.NAME])")) };
                    if pool.contains_key("name") {
                        return Err(bad(&format!(
                            "`{name}` has a `name` key: the pool's name is the NAME of [pools.NAME]"
                        )));
                    }
                    let mut pool = pool.clone();
                    pool.insert("name".into(), toml::Value::String(name.clone()));
                    out.extend(["--pool".to_string(), toml::Value::Table(pool).to_string()]);
                }
            }
            // `[[access]]` tables: one `--access` each, as the inline table it reads.
            toml::Value::Array(items) if option == "access" => {
                for item in items {
                    let toml::Value::Table(table) = item else { return Err(bad("must be tables ([[access]])")) };
                    let rule = memrelay::settings::access_rules::Rule::from_table(table).map_err(|what| bad(&what))?;
                    out.extend(["--access".to_string(), rule.to_inline()]);
                }
            }
            toml::Value::Boolean(true) => out.push(format!("--{option}")),
            toml::Value::Boolean(false) => {}
            toml::Value::String(text) => out.extend([format!("--{option}"), text.clone()]),
            toml::Value::Integer(n) => out.extend([format!("--{option}"), n.to_string()]),
            toml::Value::Float(x) => out.extend([format!("--{option}"), x.to_string()]),
            _ => return Err(bad("must be a string, a number or true/false")),
        }
    }
    Ok(out)
}

/// One server of `servers` as `--server` takes it: a string `"HOST:PORT[:WEIGHT] [NAME]"`, or a
/// table `{ address = "HOST:PORT", weight = 2, name = "cache-a" }` (weight and name optional).
fn server_spec(item: &toml::Value) -> Result<String, String> {
    const SHAPE: &str = "must list servers as \"HOST:PORT[:WEIGHT] [NAME]\" or { address, weight, name }";
    match item {
        toml::Value::String(server) => Ok(server.clone()),
        toml::Value::Table(table) => {
            if let Some(key) = table.keys().find(|k| !["address", "weight", "name"].contains(&k.as_str())) {
                return Err(format!("has a server with unknown key `{key}` (address, weight, name)"));
            }
            let Some(toml::Value::String(address)) = table.get("address") else { return Err(SHAPE.into()) };
            let mut spec = address.clone();
            match table.get("weight") {
                None => {}
                Some(toml::Value::Integer(weight)) => spec = format!("{spec}:{weight}"),
                Some(_) => return Err("has a server whose weight is not a whole number".into()),
            }
            match table.get("name") {
                None => {}
                Some(toml::Value::String(name)) => spec = format!("{spec} {name}"),
                Some(_) => return Err("has a server whose name is not a string".into()),
            }
            Ok(spec)
        }
        _ => Err(SHAPE.into()),
    }
}

/// One route of `routes` (`[[routes]]` tables) as `--route` takes it: the inline table
/// `{ prefix = "hot:", pool = "hot", write_policy = "majority" }` (or a `PREFIX=POLICY` string).
fn route_spec(item: &toml::Value) -> Result<String, String> {
    match item {
        toml::Value::String(route) => Ok(route.clone()),
        toml::Value::Table(table) => Ok(memrelay::settings::PrefixRoute::from_table(table)?.to_inline()),
        _ => Err("must list routes as [[routes]] tables with `prefix` and `pool` or `write_policy`".into()),
    }
}

/// A TOML error on one line: where, then what (the excerpt with its caret is left out).
fn one_line(error: &toml::de::Error) -> String {
    let text = error.to_string();
    let mut lines = text.lines().map(str::trim_end).filter(|l| !l.is_empty());
    let place = lines.next().unwrap_or("TOML parse error");
    let what: Vec<&str> = lines.filter(|l| !l.trim_start().starts_with('|') && !l.contains(" | ")).collect();
    format!("{place}: {}", what.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<OsString> {
        words.iter().map(OsString::from).collect()
    }

    fn expanded(file_text: &str, command_line: &[&str]) -> Result<Vec<String>, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("memrelay.toml");
        std::fs::write(&path, file_text).unwrap();
        let mut words = vec!["memrelay", "--config", path.to_str().unwrap()];
        words.extend_from_slice(command_line);
        let e = expand(argv(&words))?;
        Ok(e.argv.iter().map(|a| a.to_string_lossy().into_owned()).collect())
    }

    #[test]
    fn file_options_come_first_so_the_command_line_overrides_them() {
        let text = "servers = [\"a:1\", \"b:2\"]\nserver_timeout_ms = 500\nfailover = true\nsharded = false\n";
        let got = expanded(text, &["--server-timeout-ms", "900"]).unwrap();
        let joined = got.join(" ");
        assert!(joined.starts_with("memrelay "), "{joined}");
        for part in ["--server a:1 --server b:2", "--server-timeout-ms 500", "--failover"] {
            assert!(joined.contains(part), "{joined}");
        }
        assert!(!joined.contains("--sharded"), "{joined}");
        // The command line's value comes last, so it wins.
        assert!(joined.ends_with("--server-timeout-ms 900"), "{joined}");
        // --server on the command line replaces the file's servers.
        let got = expanded(text, &["--server", "c:3"]).unwrap();
        assert!(!got.contains(&"a:1".to_string()) && got.contains(&"c:3".to_string()));
    }

    #[test]
    fn servers_take_weights_and_names_as_strings_or_tables() {
        let text =
            "servers = [\"a:1:3 alpha\", { address = \"b:2\", weight = 2, name = \"beta\" }, { address = \"c:3\" }]\n";
        let got = expanded(text, &[]).unwrap();
        assert_eq!(got[1..], ["--server", "a:1:3 alpha", "--server", "b:2:2 beta", "--server", "c:3"]);
    }

    #[test]
    fn routes_are_tables_of_prefix_pool_and_write_policy() {
        let text = "servers = [\"a:1\"]\n[[routes]]\nprefix = \"session:\"\nwrite_policy = \"majority\"\n\
                    [[routes]]\nprefix = \"a=b\"\npool = \"hot\"\n";
        let got = expanded(text, &[]).unwrap();
        assert_eq!(
            got[1..],
            [
                "--route",
                "{ prefix = \"session:\", write_policy = \"majority\" }",
                "--route",
                "{ prefix = \"a=b\", pool = \"hot\" }",
                "--server",
                "a:1"
            ]
        );
        let bad = expanded("[[routes]]\nprefix = \"x\"\npolicy = \"all\"\n", &[]).unwrap_err();
        assert!(bad.contains("unknown key `policy`"), "{bad}");
        let shape = expanded("[[routes]]\nprefix = \"x\"\n", &[]).unwrap_err();
        assert!(shape.contains("neither a `pool` nor a `write_policy`"), "{shape}");
    }

    #[test]
    fn pools_are_tables_named_by_their_key() {
        let text = "servers = [\"a:1\"]\n[pools.hot]\nservers = [\"b:2\", \"c:3\"]\nreplication = 2\n\
                    distribution = \"ketama\"\n";
        let got = expanded(text, &[]).unwrap();
        let pool = got.windows(2).find(|w| w[0] == "--pool").map(|w| w[1].clone()).unwrap();
        let table: toml::Table = format!("p = {pool}").parse().unwrap();
        let toml::Value::Table(table) = &table["p"] else { panic!() };
        assert_eq!(table["name"].as_str(), Some("hot"));
        assert_eq!(table["replication"].as_integer(), Some(2));
        let named = expanded("servers = [\"a:1\"]\n[pools.hot]\nname = \"x\"\nservers = [\"b:2\"]\n", &[]).unwrap_err();
        assert!(named.contains("the pool's name is the NAME"), "{named}");
    }

    #[test]
    fn access_tables_become_one_access_option_each() {
        let text =
            "servers = [\"a:1\"]\nauth_file = \"/etc/users\"\n\n[[access]]\nidentity = \"t\"\nprefixes = [\"t:\"]\n\n\
                    [[access]]\nidentity = \"*\"\nread_only = true\n";
        let got = expanded(text, &[]).unwrap();
        let rules: Vec<&String> = got.windows(2).filter(|w| w[0] == "--access").map(|w| &w[1]).collect();
        assert_eq!(rules.len(), 2, "{got:?}");
        assert!(rules[0].contains("identity = \"t\"") && rules[0].contains("prefixes = [\"t:\"]"), "{got:?}");
        assert!(rules[1].contains("read_only = true"), "{got:?}");
        assert!(got.join(" ").contains("--auth-file /etc/users"));
        let bad = expanded("servers = [\"a:1\"]\n[[access]]\nidentity = \"t\"\nprefix = [\"t:\"]\n", &[]).unwrap_err();
        assert!(bad.contains("`access`") && bad.contains("unknown key `prefix`"), "{bad}");
        let not_tables = expanded("servers = [\"a:1\"]\naccess = [\"t\"]\n", &[]).unwrap_err();
        assert!(not_tables.contains("must be tables"), "{not_tables}");
    }

    #[test]
    fn placement_keys_are_twemproxys() {
        let text = "servers = [\"a:1:2 alpha\"]\ndistribution = \"modula\"\nhash = \"murmur\"\nhash_tag = \"{}\"\n";
        let got = expanded(text, &[]).unwrap();
        let joined = got.join(" ");
        for part in ["--distribution modula", "--hash murmur", "--hash-tag {}", "--server a:1:2 alpha"] {
            assert!(joined.contains(part), "{joined}");
        }
    }

    #[test]
    fn bad_files_say_where_and_why() {
        let unknown = expanded("servers = [\"a:1\"]\nserver_timout_ms = 5\n", &[]).unwrap_err();
        assert!(unknown.contains("unknown key `server_timout_ms`"), "{unknown}");
        let syntax = expanded("servers = [\"a:1\"\n", &[]).unwrap_err();
        assert!(syntax.contains("line 1") || syntax.contains("line 2"), "{syntax}");
        let server = expanded("servers = [{ address = \"a:1\", wieght = 2 }]\n", &[]).unwrap_err();
        assert!(server.contains("unknown key `wieght`"), "{server}");
        let shape = expanded("listen = [1, 2]\n", &[]).unwrap_err();
        assert!(shape.contains("`listen` must be"), "{shape}");
        assert!(expand(argv(&["memrelay", "--config"])).is_err());
    }
}
