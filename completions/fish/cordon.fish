# SPDX-License-Identifier: LGPL-2.1-or-later
# fish completion for cordon(1).
#
# One option a line, for the subcommands __cordon_cmd names: cordon's
# option tables (`cordon --list-options [COMMAND]`); -r marks an option that
# takes a value, "# [=]" one whose value is optional (--NAME=VALUE only).
# tests/integration/completion.sh fails when they differ. Profile names come
# from `cordon explain --list-profiles`: the same lookup as --profile.

# __cordon_cmd [COMMAND...]: the subcommand on the line is one of COMMAND
# (none given: there is no subcommand yet).
function __cordon_cmd
    set -l words (commandline -opc)
    set -l cmd
    for w in $words[2..-1]
        if not string match -q -- '-*' $w
            set cmd $w
            break
        end
    end
    if test (count $argv) -eq 0
        test -z "$cmd"
    else
        contains -- "$cmd" $argv
    end
end

# The options of run that take their value in the next word (the test
# holds this list to run's option table too).
set -g __cordon_run_value_options setenv unsetenv audit-file proxy-user profile workspace-root cwd allow-read allow-write deny deny-glob network allow-degraded min-landlock-abi network-proxy allow-domain deny-domain allow-cidr proxy-mode limit-tasks limit-memory limit-swap limit-cpu limit-cpu-time limit-open-files limit-file-size limit-core limit-inotify-instances limit-inotify-watches

# __cordon_run STATE: where the cursor is on a `cordon run` line: "options"
# (before the command: an option or the command), "command" (right after
# --) or "args" (the command's arguments).
function __cordon_run
    __cordon_cmd run; or return 1
    set -l words (commandline -opc)
    set -l i (contains -i -- run $words)
    set -l skip 0
    set -l dashdash 0
    set -l state options
    for w in $words[(math $i + 1)..-1]
        if test $skip -eq 1
            set skip 0
            continue
        end
        if test $dashdash -eq 1
            set state args
            break
        end
        switch $w
            case --
                set dashdash 1
                set state command
            case '--*=*'
            case '--*'
                contains -- (string sub -s 3 -- $w) $__cordon_run_value_options; and set skip 1
            case '-*'
            case '*'
                set state args
                break
        end
    end
    test "$state" = "$argv[1]"
end

# The run options apply before its command only.
function __cordon_run_options
    __cordon_run options
end

function __cordon_profiles
    set -l cordon (commandline -opc)[1]
    # NAME, a tab, its origin: fish shows the origin as the description.
    $cordon explain --list-profiles 2>/dev/null
end

complete -c cordon -f

# cordon itself
complete -c cordon -n __cordon_cmd -a run -d 'run a command under a policy'
complete -c cordon -n __cordon_cmd -a explain -d 'show the bound policy and the sandbox'
complete -c cordon -n __cordon_cmd -a probe -d 'show what this host can enforce'
complete -c cordon -n __cordon_cmd -a check -d 'validate policy files'
complete -c cordon -n __cordon_cmd -a serve -d 'serve the exec-server protocol'
complete -c cordon -n __cordon_cmd -l help -d 'show the help'
complete -c cordon -n __cordon_cmd -s h -d 'show the help'
complete -c cordon -n __cordon_cmd -l version -d 'show the version'
complete -c cordon -n __cordon_cmd -s V -d 'show the version'

# every subcommand
complete -c cordon -n '__cordon_cmd explain probe check serve; or __cordon_run_options' -l help -d 'show the help'
complete -c cordon -n '__cordon_cmd explain probe check serve; or __cordon_run_options' -s h -d 'show the help'

# run
complete -c cordon -n __cordon_run_options -l clear-env -d 'start with an empty environment'
complete -c cordon -n __cordon_run_options -l setenv -r -d 'set NAME=VALUE'
complete -c cordon -n __cordon_run_options -l unsetenv -r -d 'remove a variable'
complete -c cordon -n __cordon_run_options -l verbose -d 'print what is enforced'
complete -c cordon -n __cordon_run_options -s v -d 'print what is enforced'
complete -c cordon -n __cordon_run_options -l quiet -d 'no warnings'
complete -c cordon -n __cordon_run_options -l json-audit -d 'the proxy audit lines as JSON'
complete -c cordon -n __cordon_run_options -l audit-file -r -F -d 'append the proxy audit lines to a file'
complete -c cordon -n __cordon_run_options -l proxy-user -r -d 'as root, the ids of the proxy'
complete -c cordon -n __cordon_run_options -s q -d 'no warnings'
complete -c cordon -n '__cordon_run command; or __cordon_run options; and not string match -q -- "-*" (commandline -ct)' -a '(__fish_complete_command)'
complete -c cordon -n '__cordon_run args' -F

# the policy options of run and explain
complete -c cordon -n '__cordon_cmd explain; or __cordon_run_options' -l profile -x -a '(__cordon_profiles; __fish_complete_suffix .json)' -d 'profile name or file'
complete -c cordon -n '__cordon_cmd explain; or __cordon_run_options' -l workspace-root -r -a '(__fish_complete_directories)' -d 'a workspace root'
complete -c cordon -n '__cordon_cmd explain; or __cordon_run_options' -l cwd -r -a '(__fish_complete_directories)' -d 'the working directory'
complete -c cordon -n '__cordon_cmd explain; or __cordon_run_options' -l allow-read -r -F -a ':root :minimal :workspace_roots :tmpdir :slash_tmp' -d 'add a read entry'
complete -c cordon -n '__cordon_cmd explain; or __cordon_run_options' -l allow-write -r -F -a ':root :minimal :workspace_roots :tmpdir :slash_tmp' -d 'add a write entry'
complete -c cordon -n '__cordon_cmd explain; or __cordon_run_options' -l deny -r -F -a ':root :minimal :workspace_roots :tmpdir :slash_tmp' -d 'add a deny entry'
complete -c cordon -n '__cordon_cmd explain; or __cordon_run_options' -l deny-glob -r -d 'add a glob deny entry'
complete -c cordon -n '__cordon_cmd explain; or __cordon_run_options' -l network -x -a 'restricted managed enabled' -d 'the network mode'
complete -c cordon -n '__cordon_cmd explain; or __cordon_run_options' -l allow-degraded -x -a 'protected-metadata pid-isolation deny-masks file-attributes nested-repositories network tasks memory swap cpu inotify-instances inotify-watches' -d 'run without FEATURE'
complete -c cordon -n '__cordon_cmd explain; or __cordon_run_options' -l min-landlock-abi -x -d 'refuse below this Landlock ABI'
complete -c cordon -n '__cordon_cmd explain; or __cordon_run_options' -l network-proxy -x -d 'the proxy a managed network goes through'
complete -c cordon -n '__cordon_cmd explain; or __cordon_run_options' -l allow-domain -x -d "a name cordon's proxy allows"
complete -c cordon -n '__cordon_cmd explain; or __cordon_run_options' -l deny-domain -x -d "a name cordon's proxy denies"
complete -c cordon -n '__cordon_cmd explain; or __cordon_run_options' -l allow-cidr -x -d "addresses cordon's proxy allows"
complete -c cordon -n '__cordon_cmd explain; or __cordon_run_options' -l proxy-mode -x -a 'full limited' -d "what cordon's proxy lets through"
complete -c cordon -n '__cordon_cmd explain; or __cordon_run_options' -l socks5 -d "cordon's proxy takes SOCKS5 too"
complete -c cordon -n '__cordon_cmd explain; or __cordon_run_options' -l limit-tasks -x -d 'processes and threads at once'
complete -c cordon -n '__cordon_cmd explain; or __cordon_run_options' -l limit-memory -x -d 'memory of the sandbox'
complete -c cordon -n '__cordon_cmd explain; or __cordon_run_options' -l limit-swap -x -d 'swap of the sandbox'
complete -c cordon -n '__cordon_cmd explain; or __cordon_run_options' -l limit-cpu -x -d 'CPU quota'
complete -c cordon -n '__cordon_cmd explain; or __cordon_run_options' -l limit-cpu-time -x -d 'CPU time of each process'
complete -c cordon -n '__cordon_cmd explain; or __cordon_run_options' -l limit-open-files -x -d 'open files of each process'
complete -c cordon -n '__cordon_cmd explain; or __cordon_run_options' -l limit-file-size -x -d 'largest file written'
complete -c cordon -n '__cordon_cmd explain; or __cordon_run_options' -l limit-core -x -d 'largest core dump'
complete -c cordon -n '__cordon_cmd explain; or __cordon_run_options' -l private-tmp -d 'a private tmpfs on /tmp' # [=]
complete -c cordon -n '__cordon_cmd explain; or __cordon_run_options' -l limit-inotify-instances -x -d 'inotify instances of the sandbox'
complete -c cordon -n '__cordon_cmd explain; or __cordon_run_options' -l limit-inotify-watches -x -d 'inotify watches of the sandbox'

# explain
complete -c cordon -n '__cordon_cmd explain' -l backend -x -a 'linux seatbelt windows' -d 'the backend to explain'
complete -c cordon -n '__cordon_cmd explain' -l json -d 'one JSON object'
complete -c cordon -n '__cordon_cmd explain' -l list-profiles -d 'list the profiles and their origins'

# probe
complete -c cordon -n '__cordon_cmd probe' -l json -d 'one JSON object'

# check
complete -c cordon -n '__cordon_cmd check' -l builtin -d 'also check the built-in profiles'
complete -c cordon -n '__cordon_cmd check' -F

# serve
complete -c cordon -n '__cordon_cmd serve' -l listen -x -a 'stdio ws:// unix:' -d 'where to listen'
complete -c cordon -n '__cordon_cmd serve' -l loop -x -a 'epoll poll' -d 'event loop'
complete -c cordon -n '__cordon_cmd serve' -l max-processes -x -d 'processes per session'
complete -c cordon -n '__cordon_cmd serve' -l pid-namespace -x -a 'auto always never' -d 'run as pid 1 of a pid namespace'
complete -c cordon -n '__cordon_cmd serve' -l verbose -d 'log connections and requests'
complete -c cordon -n '__cordon_cmd serve' -s v -d 'log connections and requests'
complete -c cordon -n '__cordon_cmd serve' -l auth-token-file -r -F -d 'the bearer token file'
complete -c cordon -n '__cordon_cmd serve' -l insecure-no-auth -d 'WebSocket without a token'
complete -c cordon -n '__cordon_cmd serve' -l max-connections -x -d 'connections at once'
complete -c cordon -n '__cordon_cmd serve' -l max-sessions -x -d 'sessions at once'
complete -c cordon -n '__cordon_cmd serve' -l max-queued-bytes -x -d 'output queued per connection'
complete -c cordon -n '__cordon_cmd serve' -l session-ttl -x -d 'how long a detached session lives'
complete -c cordon -n '__cordon_cmd serve' -l ping-interval -x -d 'WebSocket ping interval'
complete -c cordon -n '__cordon_cmd serve' -l stall-timeout -x -d 'drop a client that reads nothing'
complete -c cordon -n '__cordon_cmd serve' -l unix-group -x -a '(__fish_complete_groups)' -d 'group of the unix socket'
complete -c cordon -n '__cordon_cmd serve' -l pid-file -r -F -d 'write the pid here'
complete -c cordon -n '__cordon_cmd serve' -l allow-local-users -d 'admit other local users'
complete -c cordon -n '__cordon_cmd serve' -l allow-local-group -x -a '(__fish_complete_groups)' -d 'admit a group'
complete -c cordon -n '__cordon_cmd serve' -l default-limits -x -d 'limits of processes that ask none'
complete -c cordon -n '__cordon_cmd serve' -l max-limits -x -d 'the most a process may ask'
complete -c cordon -n '__cordon_cmd serve' -l max-memory -x -d 'memory of the whole server'
complete -c cordon -n '__cordon_cmd serve' -l detached-output -x -a 'pause drop' -d 'detached output when full'
complete -c cordon -n '__cordon_cmd serve' -l retention -x -d 'how long exited processes are kept'
complete -c cordon -n '__cordon_cmd serve' -l durable-writes -d 'fsync fs/ writes'
complete -c cordon -n '__cordon_cmd serve' -l allow-http-request -d 'serve http/request to public addresses'
complete -c cordon -n '__cordon_cmd serve' -l http-allow-loopback -d 'http/request may reach loopback too'
complete -c cordon -n '__cordon_cmd serve' -l allow-degraded -x -a 'protected-metadata pid-isolation deny-masks file-attributes nested-repositories network tasks memory swap cpu inotify-instances inotify-watches' -d 'run without FEATURE'
complete -c cordon -n '__cordon_cmd serve' -l min-landlock-abi -x -d 'refuse below this Landlock ABI'
