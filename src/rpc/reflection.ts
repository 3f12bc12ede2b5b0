/**
 * gRPC server reflection (grpc.reflection.v1 and v1alpha), so that grpcurl and
 * `buf curl` can list and call the node's services without the proto files.
 *
 * @grpc/reflection serves the protocol. It takes a proto-loader PackageDefinition, but
 * of that it reads only each entry's `fileDescriptorProtos` (serialized
 * FileDescriptorProto messages; checked against @grpc/reflection 1.0.4's source). We
 * load no .proto files: the descriptors come from the generated code, which embeds
 * each file's FileDescriptorProto, serialized with protobuf-es, together with every
 * file they import (conveyor's, google.rpc's and the well-known types).
 */
import type * as grpc from "@grpc/grpc-js";
import { ReflectionService } from "@grpc/reflection";
import { toBinary, type DescFile, type DescService } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";

type PackageDefinition = ConstructorParameters<typeof ReflectionService>[0];

/** The serialized descriptors of the files declaring `services` and of everything they import. */
export function fileDescriptorProtos(services: readonly DescService[]): Buffer[] {
  const files = new Map<string, DescFile>();
  const visit = (file: DescFile) => {
    if (files.has(file.proto.name)) return;
    files.set(file.proto.name, file);
    for (const dep of file.dependencies) visit(dep);
  };
  for (const service of services) visit(service.file);
  return [...files.values()].map((file) => Buffer.from(toBinary(FileDescriptorProtoSchema, file.proto)));
}

/** Adds the reflection services to `server`, describing `services`. */
export function addReflection(server: grpc.Server, services: readonly DescService[]): void {
  const protos = fileDescriptorProtos(services);
  const definition: PackageDefinition = {};
  for (const service of services) {
    // A message-type entry in proto-loader's shape; reflection reads fileDescriptorProtos.
    definition[service.typeName] = { format: "Protocol Buffer 3 DescriptorProto", type: {}, fileDescriptorProtos: protos };
  }
  new ReflectionService(definition, { services: services.map((s) => s.typeName) }).addToServer(server);
}
