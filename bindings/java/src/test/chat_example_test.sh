#!/usr/bin/env bash
# examples/java/Chat.java as its header says to use it: compiled with javac against kiln.jar, run with
# java -cp kiln.jar:. on the shipped model (no chat template: it continues the transcript). Greedy,
# its streamed reply to "Once upon a time" is byte-identical to `kiln run -p "Once upon a time" --temp 0`.
# Usage: chat_example_test.sh JAVAC JAVA KILN_JAR LIBKILN_JNI KILN_BINARY SOURCE_DIR
set -euo pipefail
javac=$1 java=$2 jar=$3 lib=$4 kiln=$5 src=$6
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$src/examples/java/Chat.java" "$work/"
(cd "$work" && "$javac" --release 17 -cp "$jar" Chat.java)
model="$src/models/stories260K/stories260K.bin"
# As the README prints it: no -Djava.library.path; kiln.jar finds the libkiln_jni.so beside it.
[ "$(dirname "$lib")" = "$(dirname "$jar")" ] || { echo "libkiln_jni.so is not beside kiln.jar"; exit 1; }
printf 'Once upon a time\n/exit\n' | (cd "$work" && "$java" -cp "$jar:." \
  Chat "$model" --temp 0 --max-tokens 60 2>/dev/null) >"$work/chat.txt"
"$kiln" run "$model" -p "Once upon a time" --temp 0 -n 60 2>/dev/null >"$work/run.txt"
printf '\n' >>"$work/run.txt"  # Chat ends each reply with a newline
cmp "$work/chat.txt" "$work/run.txt"
echo "chat example: its streamed greedy reply equals kiln run --temp 0"
