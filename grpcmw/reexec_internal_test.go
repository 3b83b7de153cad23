package grpcmw

import (
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// TestIdempotentFromDescriptor: a method's idempotency is read from its
// registered descriptor (option idempotency_level).
func TestIdempotentFromDescriptor(t *testing.T) {
	level := func(l descriptorpb.MethodOptions_IdempotencyLevel) *descriptorpb.MethodOptions {
		return &descriptorpb.MethodOptions{IdempotencyLevel: l.Enum()}
	}
	fdp := &descriptorpb.FileDescriptorProto{
		Name: proto.String("moirai_grpcmw_test.proto"), Package: proto.String("moiraitest"), Syntax: proto.String("proto3"),
		MessageType: []*descriptorpb.DescriptorProto{{Name: proto.String("M")}},
		Service: []*descriptorpb.ServiceDescriptorProto{{Name: proto.String("Orders"), Method: []*descriptorpb.MethodDescriptorProto{
			{Name: proto.String("Get"), InputType: proto.String(".moiraitest.M"), OutputType: proto.String(".moiraitest.M"), Options: level(descriptorpb.MethodOptions_NO_SIDE_EFFECTS)},
			{Name: proto.String("Put"), InputType: proto.String(".moiraitest.M"), OutputType: proto.String(".moiraitest.M"), Options: level(descriptorpb.MethodOptions_IDEMPOTENT)},
			{Name: proto.String("Create"), InputType: proto.String(".moiraitest.M"), OutputType: proto.String(".moiraitest.M")},
		}}},
	}
	fd, err := protodesc.NewFile(fdp, protoregistry.GlobalFiles)
	if err != nil {
		t.Fatal(err)
	}
	if err := protoregistry.GlobalFiles.RegisterFile(fd); err != nil {
		t.Fatal(err)
	}
	for m, want := range map[string]bool{
		"/moiraitest.Orders/Get": true, "/moiraitest.Orders/Put": true, "/moiraitest.Orders/Create": false,
		"/moiraitest.Orders/Nope": false, "/grpc.health.v1.Health/Check": false, "garbage": false, "": false,
	} {
		if got := idempotent(m); got != want {
			t.Errorf("idempotent(%q) = %v, want %v", m, got, want)
		}
	}
}
