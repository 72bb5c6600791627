"""`.proto` source text as a FileDescriptorProto, for schemas registered as text (REST users, Java serializers).

The text is parsed by `proto-schema-parser` (a pure-Python parser of the
protobuf grammar, ANTLR-generated), made strict here: any syntax error
refuses the schema. Its syntax tree becomes the descriptor protoc would
write for what the registry reads and the compatibility rules compare:
package, messages (nested too), fields with their numbers, labels and
types (map fields as their entry messages, oneofs), enums. A named type is
resolved in the scopes of the file; one not declared there (an import) is
kept as written, fully qualified with a leading dot when it has one.
"""

from __future__ import annotations

from typing import Any

from antlr4.error.ErrorListener import ErrorListener
from google.protobuf import descriptor_pb2
from proto_schema_parser import ast
from proto_schema_parser.parser import Parser

Field = descriptor_pb2.FieldDescriptorProto
SCALARS = {
    "double": Field.TYPE_DOUBLE, "float": Field.TYPE_FLOAT, "int64": Field.TYPE_INT64, "uint64": Field.TYPE_UINT64,
    "int32": Field.TYPE_INT32, "fixed64": Field.TYPE_FIXED64, "fixed32": Field.TYPE_FIXED32,
    "bool": Field.TYPE_BOOL, "string": Field.TYPE_STRING, "bytes": Field.TYPE_BYTES, "uint32": Field.TYPE_UINT32,
    "sfixed32": Field.TYPE_SFIXED32, "sfixed64": Field.TYPE_SFIXED64, "sint32": Field.TYPE_SINT32,
    "sint64": Field.TYPE_SINT64,
}
LABELS = {"REPEATED": Field.LABEL_REPEATED, "REQUIRED": Field.LABEL_REQUIRED}


class ProtoSyntaxError(ValueError):
    """The text is not a .proto file."""


class _Strict(ErrorListener):  # type: ignore[misc]
    def syntaxError(self, recognizer: Any, offending: Any, line: int, column: int, msg: str, e: Any) -> None:  # noqa: N802
        raise ProtoSyntaxError(f"line {line}:{column} {msg}")


def _strict(recognizer: Any) -> None:
    recognizer.removeErrorListeners()
    recognizer.addErrorListener(_Strict())


def parse(text: str) -> descriptor_pb2.FileDescriptorProto:
    """The descriptor of a .proto file's text; ProtoSyntaxError when it does not parse."""
    tree = Parser(setup_lexer=_strict, setup_parser=_strict).parse(text)
    file = descriptor_pb2.FileDescriptorProto(name="schema.proto", syntax=tree.syntax or "proto2")
    elements = tree.file_elements
    file.package = next((e.name for e in elements if isinstance(e, ast.Package)), "")
    file.dependency.extend(e.name for e in elements if isinstance(e, ast.Import))
    declared = _declared(elements, "." + file.package if file.package else "")
    for element in elements:
        if isinstance(element, ast.Message):
            _message(file.message_type.add(), element, file.package, declared)
        elif isinstance(element, ast.Enum):
            _enum(file.enum_type.add(), element)
    return file


def _declared(elements: list[Any], scope: str) -> dict[str, int]:
    """Fully qualified name (".pkg.Outer.Inner") -> TYPE_MESSAGE or TYPE_ENUM, of every type declared."""
    found: dict[str, int] = {}
    for element in elements:
        if isinstance(element, ast.Message):
            name = f"{scope}.{element.name}"
            found[name] = Field.TYPE_MESSAGE
            found.update(_declared(element.elements, name))
        elif isinstance(element, ast.Enum):
            found[f"{scope}.{element.name}"] = Field.TYPE_ENUM
    return found


def _resolve(name: str, scope: str, declared: dict[str, int]) -> tuple[int, str]:
    """(type, type_name) of a named type as protobuf resolves it: innermost scope first."""
    if name.startswith("."):
        return declared.get(name, Field.TYPE_MESSAGE), name
    parts = scope.split(".")
    while True:
        candidate = ".".join(parts + [name])
        if candidate in declared:
            return declared[candidate], candidate
        if parts == [""] or not parts:
            return Field.TYPE_MESSAGE, name  # declared elsewhere (an import): kept as written
        parts = parts[:-1]


def _message(out: descriptor_pb2.DescriptorProto, message: Any, scope: str, declared: dict[str, int]) -> None:
    out.name = message.name
    inside = f".{scope}.{message.name}" if scope and not scope.startswith(".") else f"{scope}.{message.name}"
    for element in message.elements:
        if isinstance(element, ast.Field):
            _field(out.field.add(), element, inside, declared)
        elif isinstance(element, ast.MapField):
            _map(out, element, inside, declared)
        elif isinstance(element, ast.OneOf):
            out.oneof_decl.add(name=element.name)
            for member in element.elements:
                if isinstance(member, ast.Field):
                    field = out.field.add()
                    _field(field, member, inside, declared)
                    field.oneof_index = len(out.oneof_decl) - 1
        elif isinstance(element, ast.Message):
            _message(out.nested_type.add(), element, inside, declared)
        elif isinstance(element, ast.Enum):
            _enum(out.enum_type.add(), element)


def _field(out: Any, field: Any, scope: str, declared: dict[str, int]) -> None:
    out.name, out.number = field.name, field.number
    cardinality = getattr(field.cardinality, "value", None)
    out.label = LABELS.get(cardinality or "", Field.LABEL_OPTIONAL)
    _typed(out, field.type, scope, declared)


def _typed(out: Any, type_name: str, scope: str, declared: dict[str, int]) -> None:
    if type_name in SCALARS:
        out.type = SCALARS[type_name]
    else:
        out.type, out.type_name = _resolve(type_name, scope, declared)


def _map(out: descriptor_pb2.DescriptorProto, field: Any, scope: str, declared: dict[str, int]) -> None:
    """A map field: a repeated field of a nested `<Name>Entry` message with key and value, as protoc writes it."""
    entry_name = "".join(part.capitalize() for part in field.name.split("_")) + "Entry"
    entry = out.nested_type.add(name=entry_name)
    entry.options.map_entry = True
    key = entry.field.add(name="key", number=1, label=Field.LABEL_OPTIONAL)
    _typed(key, field.key_type, scope, declared)
    value = entry.field.add(name="value", number=2, label=Field.LABEL_OPTIONAL)
    _typed(value, field.value_type, scope, declared)
    out.field.add(name=field.name, number=field.number, label=Field.LABEL_REPEATED, type=Field.TYPE_MESSAGE,
                  type_name=f"{scope}.{entry_name}")


def _enum(out: descriptor_pb2.EnumDescriptorProto, enum: Any) -> None:
    out.name = enum.name
    for value in enum.elements:
        if isinstance(value, ast.EnumValue):
            out.value.add(name=value.name, number=value.number)
