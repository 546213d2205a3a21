//! Enums chosen by name: on the command line (`--format json`), in stored parameters and in
//! messages. Each such enum lists its names once ([`Choice::CHOICES`]); [`crate::choices!`] derives
//! `Display` and `FromStr` from the list, so the front end can offer the names without the
//! library depending on a command-line parser.

/// An enum whose values have names.
pub trait Choice: Copy + PartialEq + Sized + 'static {
    /// Every value with its name, in the order they are offered.
    const CHOICES: &'static [(&'static str, Self)];

    /// The names, in order.
    fn names() -> Vec<&'static str> {
        Self::CHOICES.iter().map(|(n, _)| *n).collect()
    }

    /// The name of `self`.
    fn name(self) -> &'static str {
        Self::CHOICES
            .iter()
            .find(|(_, v)| *v == self)
            .map_or("?", |(n, _)| n)
    }

    /// The value called `name`.
    fn from_name(name: &str) -> Option<Self> {
        Self::CHOICES
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
    }
}

/// Implements [`Choice`], `Display` and `FromStr` for an enum from its names:
/// `choices!(Format { "table" => Format::Table, "json" => Format::Json });`
#[macro_export]
macro_rules! choices {
    ($t:ty { $($name:literal => $v:expr),+ $(,)? }) => {
        impl $crate::choice::Choice for $t {
            const CHOICES: &'static [(&'static str, Self)] = &[$(($name, $v)),+];
        }
        impl ::std::fmt::Display for $t {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str($crate::choice::Choice::name(*self))
            }
        }
        impl ::std::str::FromStr for $t {
            type Err = String;
            fn from_str(s: &str) -> ::std::result::Result<Self, String> {
                <$t as $crate::choice::Choice>::from_name(s).ok_or_else(|| {
                    format!(
                        "{s:?}: expected one of {}",
                        <$t as $crate::choice::Choice>::names().join(", ")
                    )
                })
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::Choice;

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Two {
        A,
        B,
    }
    crate::choices!(Two { "a" => Two::A, "b-b" => Two::B });

    #[test]
    fn names_go_both_ways() {
        assert_eq!(Two::names(), ["a", "b-b"]);
        assert_eq!("b-b".parse::<Two>(), Ok(Two::B));
        assert_eq!(Two::A.to_string(), "a");
        assert!("c".parse::<Two>().unwrap_err().contains("a, b-b"));
    }
}
