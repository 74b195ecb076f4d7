# bash completion for clsctl: commands, options, interface names and policy names from the daemon,
# digests of stored objects, files where a command takes one. Installed as
# /usr/share/bash-completion/completions/clsctl.

# clsctl itself, with the options given so far that say which clsd to ask.
_clsctl_ask() {
        local -a conn=()
        local i w
        for ((i = 1; i < ${#COMP_WORDS[@]} - 1; i++)); do
                w=${COMP_WORDS[i]}
                case $w in
                --socket | --host | --cacert | --cert | --key | --token-file | -n | --netns)
                        conn+=("$w" "${COMP_WORDS[i + 1]}")
                        ;;
                --socket=* | --host=* | --cacert=* | --cert=* | --key=* | --token-file=* | --netns=*)
                        conn+=("$w")
                        ;;
                esac
        done
        "${COMP_WORDS[0]}" "${conn[@]}" "$@" 2>/dev/null
}

# The first column of a table clsctl prints, without its header.
_clsctl_column() {
        local col=$1
        shift
        _clsctl_ask "$@" | awk -v c="$col" 'NR > 1 && NF >= c { print $c }'
}

_clsctl() {
        local cur prev words cword
        _init_completion -s || return

        local opts="--socket --host --hosts --cacert --cert --key --token-file --netns --json --wait
                --if-match --fleet --fleet-prefix --fleet-ca --fleet-cert --fleet-key --fleet-user
                --fleet-password-file --waves --to --sign --apply --out --registries --watch --verbose --help
                --version"
        local commands="ls get apply diff delete netns maps map policy fleet object image help"

        case $prev in
        --socket | --hosts | --cacert | --cert | --key | --token-file | --fleet-ca | --fleet-cert | --fleet-key | \
                --fleet-password-file | --sign | --registries)
                _filedir
                return
                ;;
        --out)
                _filedir
                return
                ;;
        -n | --netns)
                COMPREPLY=($(compgen -W "$(ls /run/netns 2>/dev/null)" -- "$cur"))
                return
                ;;
        --host | --if-match | --fleet | --fleet-prefix | --wait | --fleet-user | --waves | --to)
                return
                ;;
        esac
        if [[ $cur == -* ]]; then
                COMPREPLY=($(compgen -W "$opts" -- "$cur"))
                return
        fi

        # the command and its arguments, options and their values left out
        local -a args=()
        local i w
        for ((i = 1; i < cword; i++)); do
                w=${words[i]}
                case $w in
                --socket | --host | --hosts | --cacert | --cert | --key | --token-file | -n | --netns | --if-match | \
                        --fleet | --fleet-prefix | --fleet-ca | --fleet-cert | --fleet-key | --fleet-user | \
                        --fleet-password-file | --waves | --to | --sign | --out)
                        ((i++))
                        ;;
                -*) ;;
                *) args+=("$w") ;;
                esac
        done

        case ${#args[@]} in
        0)
                COMPREPLY=($(compgen -W "$commands" -- "$cur"))
                ;;
        1)
                case ${args[0]} in
                get | apply | diff | delete | maps)
                        COMPREPLY=($(compgen -W "$(_clsctl_column 2 ls)" -- "$cur"))
                        ;;
                policy) COMPREPLY=($(compgen -W "ls get apply diff rm" -- "$cur")) ;;
                map) COMPREPLY=($(compgen -W "set rm" -- "$cur")) ;;
                fleet) COMPREPLY=($(compgen -W "apply diff ls rm nodes status rollout history rollback rbac targets top" -- "$cur")) ;;
                object) COMPREPLY=($(compgen -W "ls add show rm" -- "$cur")) ;;
                image) COMPREPLY=($(compgen -W "build push inspect" -- "$cur")) ;;
                esac
                ;;
        2)
                case ${args[0]} in
                apply | diff) _filedir json ;;
                maps) COMPREPLY=($(compgen -W "$(_clsctl_column 1 maps "${args[1]}")" -- "$cur")) ;;
                image)
                        case ${args[1]} in
                        build | push) _filedir o ;;
                        esac
                        ;;
                object)
                        case ${args[1]} in
                        add) _filedir o ;;
                        show | rm) COMPREPLY=($(compgen -W "$(_clsctl_column 1 object ls)" -- "$cur")) ;;
                        esac
                        ;;
                policy)
                        case ${args[1]} in
                        get | apply | diff | rm) COMPREPLY=($(compgen -W "$(_clsctl_column 1 policy ls)" -- "$cur")) ;;
                        esac
                        ;;
                fleet)
                        case ${args[1]} in
                        apply) _filedir json ;;
                        esac
                        ;;
                map) COMPREPLY=($(compgen -W "$(_clsctl_column 2 ls)" -- "$cur")) ;;
                esac
                ;;
        3)
                case ${args[0]} in
                map) COMPREPLY=($(compgen -W "$(_clsctl_column 1 maps "${args[2]}")" -- "$cur")) ;;
                policy) [[ ${args[1]} == apply || ${args[1]} == diff ]] && _filedir json ;;
                fleet) [[ ${args[1]} == apply ]] && _filedir json ;;
                esac
                ;;
        *)
                case ${args[0]} in
                policy) [[ ${args[1]} == apply || ${args[1]} == diff ]] && _filedir json ;;
                fleet) [[ ${args[1]} == apply ]] && _filedir json ;;
                esac
                ;;
        esac
}
complete -F _clsctl clsctl
